"""A small threaded loopback TCP proxy, to cut a client's connections on demand.

Used by the fault-injection soak (``zkconsumer bench soak``, ``tests/soak``) in front of
ZooKeeper: clients connect to the proxy, the proxy connects to the upstream for each of them
and copies bytes both ways.  Faults it injects:

* `TcpProxy.drop_all` -- close every live connection (both sides) and keep accepting new
  ones: a network blip.  A ZooKeeper client reconnects at once and keeps its session
  (SUSPENDED -> CONNECTED with the same session id), which is the case that must re-arm
  every watch.
* `TcpProxy.pause` / `TcpProxy.resume` -- stop copying bytes (connections stay open and
  silent, new ones are accepted and held): a partition of the network.  Long enough, the
  client times out and the server expires the session.

Invariants: the proxy listens on 127.0.0.1 only; a connection whose upstream cannot be
reached is closed at once (the client sees a refused-like close, as with a down server);
`close` stops the accept thread and closes every connection; every thread is a daemon, so a
forgotten proxy never keeps a process alive.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from types import TracebackType

__all__ = ["TcpProxy"]

log = logging.getLogger(__name__)

_CHUNK = 65536


class _Pair:
    """One client connection and its upstream connection, pumped by one thread."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.closed = threading.Event()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()


class TcpProxy:
    """``TcpProxy(upstream_port).start()``; clients connect to ``proxy.address``."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1", *,
                 port: int = 0, connect_timeout: float = 2.0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.connect_timeout = connect_timeout
        self._requested_port = port
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._port = 0
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._stopped = threading.Event()
        self.accepted = 0
        self.dropped = 0

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("proxy not started")
        return self._port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self._requested_port))
        listener.listen(64)
        self._listener = listener
        self._port = int(listener.getsockname()[1])
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True,
                                          name=f"proxy-accept-{self.port}")
        self._acceptor.start()
        return self

    def live_connections(self) -> int:
        with self._lock:
            return sum(1 for p in self._pairs if not p.closed.is_set())

    def drop_all(self) -> int:
        """Close every live connection (client and upstream side); returns how many."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
        n = 0
        for pair in pairs:
            if not pair.closed.is_set():
                n += 1
            pair.close()
        self.dropped += n
        log.info("proxy %s: dropped %d connection(s)", self.address, n)
        return n

    def pause(self) -> None:
        """Stop copying bytes in both directions (connections stay open)."""
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        """Stop accepting (the listening port is free once this returns) and drop every
        connection."""
        self._stopped.set()
        self._flowing.set()
        if self._listener is not None:
            # close() alone does not wake a thread blocked in accept() on Linux, and the
            # socket stays listening until that call returns: shut it down first
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._listener.close()
        if self._acceptor is not None and self._acceptor is not threading.current_thread():
            self._acceptor.join(5.0)
        self.drop_all()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _accept_loop(self) -> None:
        assert self._listener is not None  # set by start() before the thread runs
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True,
                             name=f"proxy-conn-{self.accepted}").start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=self.connect_timeout)
        except OSError:
            with contextlib.suppress(OSError):
                client.close()
            return
        upstream.settimeout(None)
        pair = _Pair(client, upstream)
        with self._lock:
            if self._stopped.is_set():
                pair.close()
                return
            self._pairs.add(pair)
        try:
            self._pump(pair)
        finally:
            pair.close()
            with self._lock:
                self._pairs.discard(pair)

    def _pump(self, pair: _Pair) -> None:
        peer = {pair.client: pair.upstream, pair.upstream: pair.client}
        with selectors.DefaultSelector() as sel:
            for sock in peer:
                sel.register(sock, selectors.EVENT_READ, sock)
            while not pair.closed.is_set():
                if not self._flowing.is_set():
                    # paused: hold the bytes in the kernel buffers until resumed or dropped
                    self._flowing.wait(0.1)
                    continue
                for key, _ in sel.select(timeout=0.1):
                    sock = key.data
                    try:
                        data = sock.recv(_CHUNK)
                        if not data:
                            return
                        peer[sock].sendall(data)
                    except OSError:
                        return
