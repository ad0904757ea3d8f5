"""The loopback TCP proxy the soak puts in front of ZooKeeper (tests/fixtures/proxy.py)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fixtures.waiting import wait_until

from zkconsumer.bench.soak_proxy import TcpProxy
from zkconsumer.zk.session import SessionState, ZkSession


@pytest.fixture
def echo_port() -> Iterator[int]:
    """A 127.0.0.1 echo server (one thread per connection)."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    yield server.getsockname()[1]
    server.shutdown(socket.SHUT_RDWR)  # close() alone leaves accept() blocked (Linux)
    server.close()
    acceptor.join(5.0)


def _roundtrip(port: int, data: bytes) -> tuple[socket.socket, bytes]:
    conn = socket.create_connection(("127.0.0.1", port), timeout=5)
    conn.sendall(data)
    got = b""
    while len(got) < len(data):
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    return conn, got


def test_copies_both_ways_and_drop_all_closes_live_connections_only(
        tcp_proxy: Callable[[int], TcpProxy], echo_port: int) -> None:
    proxy = tcp_proxy(echo_port)
    conn, got = _roundtrip(proxy.port, b"x" * 100_000)
    assert got == b"x" * 100_000
    wait_until(lambda: proxy.live_connections() == 1, what="one live connection")
    assert proxy.drop_all() == 1
    conn.settimeout(5)
    assert conn.recv(10) == b""  # closed by the proxy
    conn.close()
    again, got = _roundtrip(proxy.port, b"still accepting")  # new connections still work
    assert got == b"still accepting"
    again.close()


def test_pause_holds_bytes_until_resume(tcp_proxy: Callable[[int], TcpProxy],
                                        echo_port: int) -> None:
    proxy = tcp_proxy(echo_port)
    conn, _ = _roundtrip(proxy.port, b"warm")
    proxy.pause()
    conn.sendall(b"held")
    conn.settimeout(0.3)
    with pytest.raises(TimeoutError):
        conn.recv(10)
    proxy.resume()
    conn.settimeout(5)
    assert conn.recv(10) == b"held"
    conn.close()


def test_unreachable_upstream_closes_the_client(tcp_proxy: Callable[[int], TcpProxy]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        dead_port = s.getsockname()[1]  # closed below: nothing listens there any more
    proxy = tcp_proxy(dead_port)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as conn:
        assert conn.recv(10) == b""


def test_close_stops_listening_and_accepting(echo_port: int) -> None:
    # a thread blocked in accept() is not woken by close() alone on Linux, and the socket
    # kept listening (and accepting) after close(): the port must be free once close returns
    proxy = TcpProxy(echo_port).start()
    port = proxy.port
    conn, echoed = _roundtrip(port, b"x")
    assert echoed == b"x"
    proxy.close()
    assert not [t for t in threading.enumerate() if t.name == f"proxy-accept-{port}"]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    assert conn.recv(10) == b""  # live connections were dropped too
    conn.close()


def test_zookeeper_client_keeps_its_session_across_drop_all(
        tcp_proxy: Callable[[int], TcpProxy], zk_server: Any, zk_chroot: str) -> None:
    proxy = tcp_proxy(zk_server.port)
    states: list[SessionState] = []
    session = ZkSession(f"{proxy.address}{zk_chroot}", session_timeout_ms=4000).start()
    try:
        session.add_state_listener(states.append)
        before = session.session_id
        assert proxy.drop_all() >= 1
        wait_until(lambda: SessionState.CONNECTED in states, what="reconnected")
        assert SessionState.SUSPENDED in states and SessionState.LOST not in states
        assert session.session_id == before
        assert session.exists("/") is not None
    finally:
        session.close()
