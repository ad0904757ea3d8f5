"""BrokerConnection over real loopback sockets: framing, errors, backoff, peer-close checks.

The "brokers" here are tiny scripted TCP servers (real sockets, no mocks), so each failure
mode a broker can produce is reproduced exactly and deterministically.
"""

from __future__ import annotations

import contextlib
import random
import socket
import struct
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator

import pytest
from fixtures.sockets import recv_exact
from fixtures.waiting import wait_until

from zkconsumer.client import BrokerConnection, SimpleConsumer, parse_broker_address
from zkconsumer.errors import BrokerConnectionError, ConfigurationError, ConnectionClosedError
from zkconsumer.protocol import FetchRequest, OffsetsRequest, ProduceRequest, encode_request


class ScriptedServer:
    """Accepts connections on 127.0.0.1 and runs ``script(conn)`` for each one."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.script = script
        self.accepted = 0
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            with conn, contextlib.suppress(OSError):
                self.script(conn)

    def read_frame(self, conn: socket.socket) -> bytes:
        head = recv_exact(conn, 4)
        body = recv_exact(conn, struct.unpack(">i", head)[0])
        self.received.append(head + body)
        return body

    def close(self) -> None:
        self.listener.close()


Factory = Callable[[Callable[[socket.socket], None]], ScriptedServer]


@pytest.fixture
def server_factory() -> Iterator[Factory]:
    servers: list[ScriptedServer] = []

    def make(script: Callable[[socket.socket], None]) -> ScriptedServer:
        servers.append(ScriptedServer(script))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


FETCH = FetchRequest("t", 0, 0, 100)


def test_request_reads_one_whole_frame_even_in_pieces(server_factory: Factory) -> None:
    body = b"\x00\x00" + bytes(range(256)) * 40

    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        data = frame(body)
        for i in range(0, len(data), 7):  # dribble it out 7 bytes at a time
            conn.sendall(data[i:i + 7])
        srv.read_frame(conn)
        conn.sendall(frame(b"\x00\x00second"))
        conn.recv(1)

    srv = server_factory(script)
    with BrokerConnection("127.0.0.1", srv.port) as conn:
        assert conn.request(FETCH) == body
        assert conn.request(FETCH) == b"\x00\x00second"
    assert srv.received[0] == encode_request(FETCH)


def test_send_writes_the_frame_and_expects_nothing(server_factory: Factory) -> None:
    got = threading.Event()

    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        got.set()
        conn.recv(1)

    srv = server_factory(script)
    req = ProduceRequest("t", 0, b"")
    with BrokerConnection("127.0.0.1", srv.port) as conn:
        conn.send(req)
        wait_until(got.is_set, what="server to read the produce")
    assert srv.received == [encode_request(req)]


def test_eof_mid_frame_is_connection_closed_and_reconnects(server_factory: Factory) -> None:
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        if srv.accepted == 1:
            conn.sendall(struct.pack(">i", 100) + b"\x00\x00partial")  # then close
        else:
            conn.sendall(frame(b"\x00\x00ok"))
            conn.recv(1)

    srv = server_factory(script)
    conn = BrokerConnection("127.0.0.1", srv.port)
    with pytest.raises(ConnectionClosedError, match=rf"127\.0\.0\.1:{srv.port}"):
        conn.request(FETCH)
    assert not conn.connected
    assert conn.request(FETCH) == b"\x00\x00ok"  # lazily reconnected, no backoff
    assert srv.accepted == 2
    conn.close()


def test_socket_timeout_is_a_broker_connection_error(server_factory: Factory) -> None:
    release = threading.Event()

    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        release.wait(10)  # never answers in time

    srv = server_factory(script)
    conn = BrokerConnection("127.0.0.1", srv.port, socket_timeout=0.2)
    with pytest.raises(BrokerConnectionError, match="timed out") as info:
        conn.request(FETCH)
    assert not isinstance(info.value, ConnectionClosedError)
    assert (info.value.host, info.value.port) == ("127.0.0.1", srv.port)
    assert not conn.connected  # a half-read answer would poison the next request
    release.set()
    conn.close()


def test_invalid_response_size_drops_the_connection(server_factory: Factory) -> None:
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        conn.sendall(struct.pack(">i", -5))
        conn.recv(1)

    srv = server_factory(script)
    conn = BrokerConnection("127.0.0.1", srv.port)
    with pytest.raises(BrokerConnectionError, match="invalid response size -5"):
        conn.request(FETCH)
    assert not conn.connected


def test_refused_connect_backs_off_exponentially_and_fails_fast() -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    now = [1000.0]
    conn = BrokerConnection("127.0.0.1", port, reconnect_backoff=0.5,
                            reconnect_backoff_max=1.5, clock=lambda: now[0])
    with pytest.raises(BrokerConnectionError, match="cannot connect") as info:
        conn.request(FETCH)
    assert info.value.port == port
    with pytest.raises(BrokerConnectionError, match=r"not reconnecting for another 0\.500s"):
        conn.request(FETCH)
    now[0] += 0.5
    with pytest.raises(BrokerConnectionError, match="cannot connect"):
        conn.request(FETCH)  # second failure: backoff doubles
    with pytest.raises(BrokerConnectionError, match=r"another 1\.000s"):
        conn.request(FETCH)
    now[0] += 1.0
    with pytest.raises(BrokerConnectionError, match="cannot connect"):
        conn.request(FETCH)
    with pytest.raises(BrokerConnectionError, match=r"another 1\.500s"):  # capped
        conn.request(FETCH)


def test_backoff_resets_after_a_successful_connect(server_factory: Factory) -> None:
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        conn.sendall(frame(b"\x00\x00up"))
        conn.recv(1)

    srv = server_factory(script)
    now = [0.0]
    conn = BrokerConnection("127.0.0.1", srv.port, clock=lambda: now[0])
    for _ in range(3):  # as after three failed connects
        conn._backoff.next_delay()
    conn._retry_at = 5.0
    with pytest.raises(BrokerConnectionError, match="not reconnecting"):
        conn.request(FETCH)
    now[0] = 5.0
    assert conn.request(FETCH) == b"\x00\x00up"
    assert conn._backoff.attempts == 0
    conn.close()


def test_a_connection_closed_by_the_broker_is_replaced_before_writing(server_factory: Factory) -> None:
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        if srv.accepted == 1:
            return  # like a 0.7 broker after a bad produce: close, no answer
        conn.sendall(frame(b"\x00\x00fresh"))
        conn.recv(1)

    srv = server_factory(script)
    conn = BrokerConnection("127.0.0.1", srv.port)
    conn.send(ProduceRequest("t", 9, b""))
    wait_until(lambda: srv.accepted == 1 and len(srv.received) == 1, what="first produce read")
    sock = conn._sock
    assert sock is not None
    wait_until(lambda: conn._peer_closed(sock), what="the close to reach the client")
    # Without the check this request would be written into the dead socket.
    assert conn.request(OffsetsRequest("t", 0, -1, 1)) == b"\x00\x00fresh"
    assert srv.accepted == 2
    conn.close()


def test_exchange_returns_the_answers_before_a_close(server_factory: Factory) -> None:
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        conn.sendall(frame(b"\x00\x00one"))
        srv.read_frame(conn)  # second request: "rejected", close without answering

    srv = server_factory(script)
    conn = BrokerConnection("127.0.0.1", srv.port)
    data = encode_request(FETCH) * 3
    assert conn.exchange(data, 3, partial_ok=True) == [b"\x00\x00one"]
    with pytest.raises(ConnectionClosedError):
        conn.exchange(data, 3)
    conn.close()


@pytest.mark.parametrize("text,expected", [
    ("localhost:9092", ("localhost", 9092)),
    (" 10.0.0.1:1 ", ("10.0.0.1", 1)),
    ("[::1]:9092", ("::1", 9092)),
])
def test_parse_broker_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_broker_address(text) == expected


@pytest.mark.parametrize("text", ["localhost", ":9092", "host:port", "host:0", "host:65536"])
def test_parse_broker_address_rejects(text: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_broker_address(text)


def test_invalid_arguments() -> None:
    with pytest.raises(ConfigurationError):
        BrokerConnection("h", 1, socket_timeout=0)
    with pytest.raises(ConfigurationError):
        BrokerConnection("h", 1, reconnect_backoff=2, reconnect_backoff_max=1)
    with pytest.raises(ConfigurationError):
        BrokerConnection("h", 1, request_timeout=0)
    with pytest.raises(ConfigurationError):
        BrokerConnection("h", 1, max_response_size=1)


# -- bounded responses: a deadline per request, a size bound checked before allocating -----


def _trickle(srv: ScriptedServer, stop: threading.Event, prefix: bytes) -> Callable[
        [socket.socket], None]:
    """A broker that sends ``prefix`` then one byte every 50 ms: never silent for long."""
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        conn.sendall(prefix)
        while not stop.wait(0.05):  # the pacing of the misbehaving peer, not a test wait
            conn.sendall(b"x")
    return script


def test_a_trickling_broker_hits_the_request_deadline(server_factory: Factory) -> None:
    stop = threading.Event()
    srv = server_factory(lambda c: script(c))
    script = _trickle(srv, stop, struct.pack(">i", 1000) + b"\x00\x00")
    # Each byte arrives well within socket_timeout: only an overall deadline can end this.
    conn = BrokerConnection("127.0.0.1", srv.port, socket_timeout=5.0, request_timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(BrokerConnectionError,
                           match=rf"request timeout of 0\.5s.*127\.0\.0\.1:{srv.port}"):
            conn.request(FETCH)
        assert time.monotonic() - started < 3.0  # not 1000 bytes x 50 ms = 50 s
        assert not conn.connected  # the frame is half read: the stream cannot be reused
    finally:
        stop.set()
        conn.close()


def test_request_timeout_defaults_to_the_socket_timeout(server_factory: Factory) -> None:
    stop = threading.Event()
    srv = server_factory(lambda c: script(c))
    script = _trickle(srv, stop, struct.pack(">i", 1000))
    conn = BrokerConnection("127.0.0.1", srv.port, socket_timeout=0.4)
    assert conn.request_timeout == 0.4
    started = time.monotonic()
    try:
        with pytest.raises(BrokerConnectionError, match=r"request timeout of 0\.4s"):
            conn.request(FETCH)
        assert time.monotonic() - started < 3.0
    finally:
        stop.set()
        conn.close()


def test_the_deadline_is_per_request_not_per_connection(server_factory: Factory) -> None:
    """Slow-ish answers that each fit the deadline keep working, one after another."""
    def script(conn: socket.socket) -> None:
        for _ in range(3):
            srv.read_frame(conn)
            data = frame(b"\x00\x00" + b"y" * 6)
            for i in range(0, len(data), 4):
                conn.sendall(data[i:i + 4])
        conn.recv(1)

    srv = server_factory(script)
    with BrokerConnection("127.0.0.1", srv.port, request_timeout=2.0) as conn:
        for _ in range(3):
            assert conn.request(FETCH) == b"\x00\x00yyyyyy"


def _lying_size(srv_box: list[ScriptedServer], size: int) -> Callable[[socket.socket], None]:
    def script(conn: socket.socket) -> None:
        srv_box[0].read_frame(conn)
        conn.sendall(struct.pack(">i", size) + b"\x00\x00\x00\x00")
        conn.recv(1)  # then nothing: a client that believed the prefix would wait here
    return script


def test_a_huge_size_prefix_is_refused_before_allocating(server_factory: Factory) -> None:
    box: list[ScriptedServer] = []
    box.append(server_factory(_lying_size(box, (1 << 30) - 1)))
    conn = BrokerConnection("127.0.0.1", box[0].port, socket_timeout=5.0)
    tracemalloc.start()
    try:
        with pytest.raises(BrokerConnectionError,
                           match=rf"protocol error: invalid response size {(1 << 30) - 1}, "
                                 rf"outside 2\.\.{256 << 20}.*127\.0\.0\.1:{box[0].port}"):
            conn.request(FETCH)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # nothing near the claimed GiB was allocated
    assert not conn.connected


def test_max_response_size_is_configurable_and_per_call(server_factory: Factory) -> None:
    box: list[ScriptedServer] = []
    box.append(server_factory(_lying_size(box, 5000)))
    conn = BrokerConnection("127.0.0.1", box[0].port, max_response_size=4096)
    with pytest.raises(BrokerConnectionError, match=r"invalid response size 5000, outside "
                                                    r"2\.\.4096"):
        conn.request(FETCH)
    conn = BrokerConnection("127.0.0.1", box[0].port)
    with pytest.raises(BrokerConnectionError, match=r"size 5000, outside 4\.\.300"):
        conn.request_split(FETCH, 4, max_size=300)


def test_simple_consumer_bounds_a_fetch_answer_by_its_max_size(server_factory: Factory) -> None:
    """64 MiB is under the connection's default cap, but a fetch of 100 bytes cannot be
    answered with more than 2 + 100 bytes by a 0.7 broker: refused, not allocated."""
    box: list[ScriptedServer] = []
    box.append(server_factory(_lying_size(box, 64 << 20)))
    with SimpleConsumer("127.0.0.1", box[0].port, fetch_size=100) as consumer:
        with pytest.raises(BrokerConnectionError, match=r"invalid response size 67108864"):
            consumer.fetch("t", 0, 0)
        with pytest.raises(BrokerConnectionError, match=r"invalid response size 67108864"):
            consumer.offsets("t", 0, -1)


def test_simple_consumer_accepts_a_full_size_fetch_answer(server_factory: Factory) -> None:
    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        conn.sendall(frame(b"\x00\x00" + b"m" * 100))  # exactly max_size message bytes
        conn.recv(1)

    srv = server_factory(script)
    with SimpleConsumer("127.0.0.1", srv.port, fetch_size=100) as consumer:
        assert consumer.fetch("t", 0, 0).messages == b"m" * 100


def test_a_broker_that_stops_reading_fails_the_send_within_the_socket_timeout(
        server_factory: Factory) -> None:
    """The socket is blocking with kernel timeouts (``SO_SNDTIMEO``): a send the peer never
    drains still ends at the timeout, as a `BrokerConnectionError`, and the half-written
    frame's connection is dropped."""
    stop = threading.Event()
    srv = server_factory(lambda conn: stop.wait(10))  # accepts, never reads
    conn = BrokerConnection("127.0.0.1", srv.port, socket_timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(BrokerConnectionError, match=r"send timed out"):
            conn.send(ProduceRequest("t", 0, b"x" * (64 << 20)))  # far over both buffers
        assert time.monotonic() - started < 3.0
        assert not conn.connected
    finally:
        stop.set()
        conn.close()


def test_a_response_split_over_many_segments_is_read_whole(server_factory: Factory) -> None:
    """One ``recv_into`` with ``MSG_WAITALL`` per body; a body sent in pieces with pauses
    (each well within the socket timeout) still arrives complete and in order."""
    body = b"\x00\x00" + bytes(range(256)) * 4096  # 1 MiB + 2

    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        data = frame(body)
        for i in range(0, len(data), 100_000):
            conn.sendall(data[i:i + 100_000])
            stop.wait(0.01)  # the pacing of the peer, not a test wait
        conn.recv(1)

    stop = threading.Event()
    srv = server_factory(script)
    with BrokerConnection("127.0.0.1", srv.port, socket_timeout=2.0) as conn:
        assert conn.request(FETCH, max_size=len(body)) == body


def test_abort_ends_a_read_blocked_in_another_thread_at_once(server_factory: Factory) -> None:
    """`abort` shuts the socket down under a blocked (kernel-timed, ``MSG_WAITALL``) read:
    the reader fails with `ConnectionClosedError` at once, not after ``socket_timeout``."""
    stop = threading.Event()

    def script(conn: socket.socket) -> None:
        srv.read_frame(conn)
        stop.wait(30)  # never answers

    srv = server_factory(script)
    conn = BrokerConnection("127.0.0.1", srv.port, socket_timeout=30.0)
    errors: list[BaseException] = []

    def read() -> None:
        try:
            conn.request(FETCH)
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    try:
        reader.start()
        wait_until(lambda: len(srv.received) == 1, timeout=5, what="the request sent")
        started = time.monotonic()
        conn.abort()
        reader.join(5)
        assert not reader.is_alive() and time.monotonic() - started < 2.0
        assert len(errors) == 1 and isinstance(errors[0], ConnectionClosedError), errors
    finally:
        stop.set()
        reader.join(5)


def test_pieces_are_written_whole_and_in_order(server_factory: Factory) -> None:
    """`exchange` of pieces (``sendmsg``, no joined copy): more pieces than one call takes
    (IOV_MAX), some empty, megabytes in all, to a peer that drains in odd amounts -- all of
    them arrive, in order."""
    rng = random.Random(7)
    pieces = [bytes([i % 251]) * rng.choice((0, 1, 3, 700, 4096)) for i in range(3000)]
    pieces += [bytes(range(256)) * 8192] * 3  # 2 MiB each: far over both socket buffers
    data = b"".join(pieces)
    got = bytearray()

    def script(conn: socket.socket) -> None:
        while len(got) < len(data):
            chunk = conn.recv(rng.choice((1, 100, 65536)))
            if not chunk:
                return
            got.extend(chunk)
        conn.sendall(frame(b"\x00\x00done"))
        conn.recv(1)

    srv = server_factory(script)
    with BrokerConnection("127.0.0.1", srv.port, socket_timeout=10.0) as conn:
        assert conn.exchange(pieces, 1) == [b"\x00\x00done"]
    assert got == data
