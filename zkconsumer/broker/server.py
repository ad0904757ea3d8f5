"""The dev broker's network server and lifecycle (network/SocketServer.scala + KafkaServer.scala).

Job: accept TCP connections, read size-prefixed request frames with the codec's
`FrameReader`, hand each to the `RequestHandler`, and write the answer: header bytes with
``sendall`` and message bytes straight from the segment files with ``os.sendfile`` (zero-copy,
the ``FileChannel.transferTo`` of the reference).  `Broker` ties together the log manager,
the server and the ZooKeeper registrar in the reference's start/stop order.

Invariants
    * One thread per connection, a blocking loop; requests on a connection are handled in
      order, and a connection whose request fails in any way is closed (no response), which
      is how a 0.7 broker reports produce errors.
    * A request frame larger than ``max.socket.request.bytes`` (or of size <= 0) closes the
      connection before its body is read.
    * Startup order: logs loaded -> socket bound -> ZooKeeper registration -> accepting.  A
      client that connects early waits in the backlog, like the reference's ``awaitStartup``.
    * `Broker.stop`: stop accepting, close connections, flush and close the logs (leaving
      the clean-shutdown marker), then close the ZooKeeper session, which removes the
      ephemeral registrations.  Idempotent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from types import TracebackType

from zkconsumer.broker.config import BrokerConfig
from zkconsumer.broker.handlers import BrokerStats, RequestHandler, Response
from zkconsumer.broker.log import FetchRegion
from zkconsumer.broker.manager import LogManager
from zkconsumer.broker.registration import BrokerRegistrar, default_host
from zkconsumer.errors import BrokerStartupError
from zkconsumer.protocol import FrameReader

__all__ = ["Broker"]

log = logging.getLogger(__name__)

_MSG_MORE = getattr(socket, "MSG_MORE", 0)
_RECV_SIZE = 256 * 1024


class Broker:
    """A Kafka 0.7.2-compatible broker: ``Broker(config).start()`` ... ``.stop()``.

    After `start`, ``port`` is the bound port (useful with ``port=0``), ``host`` the advertised
    host, ``registrar`` the ZooKeeper registrar (None when standalone).
    """

    def __init__(self, config: BrokerConfig, *, cleanup_interval_s: float | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.log_dir = config.log_dir
        self.host = config.host or (default_host() if config.bind in ("", "0.0.0.0", "::")
                                    else config.bind)
        self.port = config.port
        self.manager: LogManager | None = None
        self.handler: RequestHandler | None = None
        self.registrar: BrokerRegistrar | None = None
        self._cleanup_interval_s = cleanup_interval_s
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Broker:
        if self._started:
            return self
        self._started = True
        try:
            self.manager = LogManager(self.config, on_new_topic=self._on_new_topic,
                                      cleanup_interval_s=self._cleanup_interval_s)
            self.handler = RequestHandler(self.manager)
            self._listener = self._bind()
            self.port = self._listener.getsockname()[1]
            connect = self.config.zk_connect
            if self.config.uses_zookeeper and connect is not None:
                self.registrar = BrokerRegistrar(
                    connect, self.broker_id, self.host, self.port,
                    partition_count=self.manager.partition_count,
                    session_timeout_ms=self.config.zk_session_timeout_ms,
                    connection_timeout_ms=self.config.zk_connection_timeout_ms,
                    registration_wait_ms=self.config.registration_wait_ms,
                    security=self.config.zk_security)
                self.registrar.start(self.manager.topics())
            self.manager.start()
        except BaseException:
            self._abort()
            raise
        self._acceptor = threading.Thread(target=self._accept_loop,
                                          args=(self._listener, self.handler),
                                          name=f"broker-{self.broker_id}-acceptor", daemon=True)
        self._acceptor.start()
        log.info("broker %d started on %s:%d (log.dir %s, %s)", self.broker_id, self.host,
                 self.port, self.log_dir,
                 f"zk.connect {self.config.zk_connect}" if self.registrar else "standalone")
        return self

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.socket_receive_buffer)
            sock.bind((self.config.bind, self.config.port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise BrokerStartupError(
                f"cannot listen on {self.config.bind or '0.0.0.0'}:{self.config.port}: {exc}"
            ) from exc
        return sock

    def _abort(self) -> None:
        """Undo a partial start (no clean-shutdown marker: nothing was served)."""
        if self._listener is not None:
            self._listener.close()
        if self.registrar is not None:
            self.registrar.close()
        if self.manager is not None:
            self.manager.close(clean=False)
        self._stopped.set()

    def stop(self) -> None:
        """Stop serving, flush and close the logs, deregister from ZooKeeper.  Idempotent."""
        with self._lock:
            if self._stopping.is_set() or not self._started:
                return
            self._stopping.set()
        log.info("shutting down broker %d", self.broker_id)
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._acceptor is not None:
            self._acceptor.join(timeout=10)
        with self._lock:
            conns = list(self._conns.items())
        for conn, _ in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for _, thread in conns:
            thread.join(timeout=10)
        if self.manager is not None:
            self.manager.close()
        if self.registrar is not None:
            self.registrar.close()
        self._stopped.set()
        log.info("broker %d shut down", self.broker_id)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until `stop` completed."""
        return self._stopped.wait(timeout)

    @property
    def running(self) -> bool:
        return self._started and not self._stopping.is_set()

    @property
    def stats(self) -> BrokerStats:
        if self.handler is None:
            return BrokerStats()
        return self.handler.stats

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __enter__(self) -> Broker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------------ internals
    def _on_new_topic(self, topic: str) -> None:
        if self.registrar is not None:
            self.registrar.topic_created(topic)

    def _accept_loop(self, listener: socket.socket, handler: RequestHandler) -> None:
        while not self._stopping.is_set():
            try:
                conn, peer = listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("error in acceptor")
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.socket_send_buffer)
            thread = threading.Thread(target=self._serve, args=(conn, peer, handler),
                                      name=f"broker-{self.broker_id}-conn-{peer[1]}",
                                      daemon=True)
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    return
                self._conns[conn] = thread
            thread.start()

    def _serve(self, conn: socket.socket, peer: tuple[str, int],
               handler: RequestHandler) -> None:
        reader = FrameReader(max_frame=self.config.max_request_size)
        buf = bytearray(_RECV_SIZE)
        view = memoryview(buf)
        try:
            while True:
                frame = reader.next_frame()
                if frame is None:
                    room = reader.room()
                    if room is not None and len(room) >= _RECV_SIZE:
                        n = conn.recv_into(room)  # a large body: straight into it, no copy
                        if n == 0:
                            return
                        reader.received(n)
                        continue
                    n = conn.recv_into(buf)
                    if n == 0:
                        return
                    reader.feed(view[:n])
                    continue
                response = handler.handle(frame)
                if response is not None:
                    _send(conn, response)
                    if response.close_after:
                        return
        except Exception as exc:
            if not self._stopping.is_set():
                log.info("closing socket connection to %s:%d: %s", peer[0], peer[1], exc,
                         exc_info=log.isEnabledFor(logging.DEBUG))
        finally:
            with self._lock:
                self._conns.pop(conn, None)
            conn.close()


def _send(conn: socket.socket, response: Response) -> None:
    """Write a response: byte pieces coalesced, file regions with os.sendfile."""
    pending = bytearray()
    out = conn.fileno()
    for part in response.parts:
        if isinstance(part, FetchRegion):
            if pending:
                conn.sendall(pending, _MSG_MORE)
                pending.clear()
            position, remaining = part.position, part.length
            while remaining > 0:
                sent = os.sendfile(out, part.fd, position, remaining)
                if sent == 0:
                    raise OSError(f"segment ended {remaining} bytes early")
                position += sent
                remaining -= sent
        else:
            pending += part
    if pending:
        conn.sendall(pending)
