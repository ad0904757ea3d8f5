"""One blocking TCP connection to a Kafka 0.7 broker: the only place zkconsumer opens sockets.

Job: send request frames and read response frames, in order.  Kafka 0.7 has no correlation
id: the broker answers the requests of one connection strictly in the order it read them, and
a produce gets *no* answer at all.  So a connection is a pipe with an implicit queue of
expected answers, and anything that breaks that queue (a timeout half-way through a frame, an
``OSError``) leaves the connection unusable: we close it and the next call reconnects.

Invariants
    * Every socket-level failure surfaces as `BrokerConnectionError` naming ``host:port``; a peer
      that closed the connection (EOF, ``ECONNRESET``, ``EPIPE``) surfaces as its subclass
      `ConnectionClosedError`.  After either, the socket is closed and the next call
      reconnects lazily.
    * A failed *connect* starts an exponential backoff (``reconnect_backoff`` doubling up to
      ``reconnect_backoff_max``).  While it runs, calls fail fast with `BrokerConnectionError`
      instead of blocking: the caller (a producer with other brokers, a consumer fetcher with its
      own backoff) decides whether to wait.  A connection that worked and then broke may
      reconnect immediately: the broker is probably fine and just closed on us (e.g. after a
      rejected produce).
    * Before every write one zero-timeout ``select`` checks whether the broker closed the
      connection since the last exchange (0.7 brokers close it on a bad produce; a write into
      a half-closed socket would "succeed" and vanish).  Such a connection is replaced first.
    * Every request is bounded in time *and* size.  ``socket_timeout`` bounds each socket
      call; ``request_timeout`` (default: ``socket_timeout``) bounds the whole exchange, from
      the write to the last byte of the answer, so a broker trickling a byte every few
      seconds cannot stretch one response forever.  A size prefix above the request's bound
      (``max_response_size``, or the tighter one the caller computed from its request) is a
      protocol error raised *before* anything is allocated.  Either way the connection is
      dropped (the frame is half read: the stream is out of sync).
    * Responses are read with one ``recv_into`` loop into a buffer preallocated from the 4-byte
      size, then returned as ``bytes``: one allocation and one copy per response.
    * The socket is in *blocking* mode and its timeouts are the kernel's (``SO_SNDTIMEO``,
      ``SO_RCVTIMEO``, set before each call), so a request is written by as few ``send``
      calls as the kernel allows and a response body is read by one ``recv_into`` with
      ``MSG_WAITALL``.  Why: every socket call re-takes the GIL when it returns, and while
      another thread computes (the application beside a fetcher, the bridge's loop beside its
      writer) that costs up to ``sys.getswitchinterval()`` per call.  Python's own socket
      timeouts make the socket non-blocking, and then a 20 MB produce through a 100 KB send
      buffer is hundreds of poll-and-send rounds.  `zkconsumer bench fetch --busy-thread`
      measures it (docs/performance.md, "Socket I/O beside a busy thread").  The time bounds are
      unchanged: each call is bounded by ``socket_timeout`` and the exchange by
      ``request_timeout``.

Thread-safety: one connection serves one thread at a time.  Every public method takes an
internal lock for the whole send-and-read exchange, so concurrent callers are serialised
rather than interleaved (interleaving would mismatch answers); for parallelism open one
connection per thread.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType

from zkconsumer.backoff import Backoff
from zkconsumer.errors import BrokerConnectionError, ConfigurationError, ConnectionClosedError
from zkconsumer.protocol import Request, encode_request, encode_request_parts

__all__ = ["MAX_RESPONSE_SIZE", "BrokerConnection", "parse_broker_address"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")  # int32 size of the rest of the response frame
#: Pieces per ``sendmsg`` call (Linux's IOV_MAX is 1024).
_IOV_MAX = 1024
_TIMEVAL = struct.Struct("@ll")  # struct timeval (time_t, suseconds_t) for SO_*TIMEO
#: Default bound on one response frame body: far above any sane fetch (a 0.7 broker answers
#: at most the requested ``max_size`` + 2 bytes), far below "allocate whatever the peer says".
#: Callers that know their request's bound pass it per call (`SimpleConsumer` does).
MAX_RESPONSE_SIZE = 256 * 1024 * 1024


def _set_timeout(sock: socket.socket, option: int, seconds: float) -> None:
    """Set ``SO_SNDTIMEO``/``SO_RCVTIMEO`` to ``seconds`` (at least 1 ms: a zero timeval means
    "wait forever")."""
    seconds = max(seconds, 0.001)
    whole = int(seconds)
    sock.setsockopt(socket.SOL_SOCKET, option, _TIMEVAL.pack(whole, int((seconds - whole) * 1e6)))


def parse_broker_address(address: str) -> tuple[str, int]:
    """Split ``"host:port"`` into ``(host, port)``; `ConfigurationError` if it is not one.

    0.7 brokers register ``creator:host:port`` with IPv4 hosts, so the last ``:`` separates the
    port (a bracketed IPv6 literal ``[::1]:9092`` is accepted for completeness).
    """
    host, sep, port_text = address.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host:
        raise ConfigurationError(f"broker address {address!r} is not HOST:PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigurationError(f"broker address {address!r}: port is not a number") from None
    if not 0 < port < 65536:
        raise ConfigurationError(f"broker address {address!r}: port out of range 1..65535")
    return host, port


class BrokerConnection:
    """A lazily (re)connected, blocking, in-order request/response channel to one broker."""

    def __init__(self, host: str, port: int, *, connect_timeout: float = 5.0,
                 socket_timeout: float = 30.0, send_buffer: int = 102400,
                 recv_buffer: int = 65536, reconnect_backoff: float = 0.1,
                 reconnect_backoff_max: float = 10.0, request_timeout: float | None = None,
                 max_response_size: int = MAX_RESPONSE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if connect_timeout <= 0 or socket_timeout <= 0:
            raise ConfigurationError("connect_timeout and socket_timeout must be > 0")
        if request_timeout is not None and request_timeout <= 0:
            raise ConfigurationError(f"request_timeout must be > 0, got {request_timeout}")
        if max_response_size < 2:
            raise ConfigurationError(f"max_response_size must be >= 2, got {max_response_size}")
        if reconnect_backoff < 0 or reconnect_backoff_max < reconnect_backoff:
            raise ConfigurationError("need 0 <= reconnect_backoff <= reconnect_backoff_max")
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        self.socket_timeout = socket_timeout
        self.request_timeout = socket_timeout if request_timeout is None else request_timeout
        self.max_response_size = max_response_size
        self.send_buffer = send_buffer
        self.recv_buffer = recv_buffer
        self.reconnect_backoff = reconnect_backoff
        self.reconnect_backoff_max = reconnect_backoff_max
        self._clock = clock
        self._sock: socket.socket | None = None
        self._lock = threading.RLock()
        # Counts consecutive failed connects; a successful connect resets it.
        self._backoff = Backoff(reconnect_backoff, reconnect_backoff_max, clock=clock)
        self._retry_at = 0.0        # clock() before which we do not try to connect again
        self._size_buf = bytearray(4)
        self._deadline = 0.0        # clock() by which the current response must be complete
        self._aborted = False       # abort() was called: never connect again
        self.requests_sent = 0      # frames written since the last (re)connect
        self.connected_at: float | None = None  # clock() of the last successful connect

    # -- lifecycle ---------------------------------------------------------------------------

    def __repr__(self) -> str:
        state = "connected" if self._sock is not None else "idle"
        return f"<BrokerConnection {self.host}:{self.port} {state}>"

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        """Connect now if not connected (normally done lazily by the first request)."""
        with self._lock:
            self._ensure()

    def close(self) -> None:
        """Close the socket; idempotent.  A later call reconnects (no backoff)."""
        with self._lock:
            self._drop()

    def abort(self) -> None:
        """Close for good, from any thread, without waiting for a call in progress.

        `close` waits for the lock, i.e. for a blocked read to time out (``socket_timeout``).
        This shuts the socket down under that read instead, so it fails at once with
        `ConnectionClosedError`, and every later call raises without connecting.  For owners
        that must shut down within a deadline (``Producer.close(timeout)``).
        """
        self._aborted = True
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._lock.acquire(blocking=False):
            try:
                self._drop()
            finally:
                self._lock.release()

    def __enter__(self) -> BrokerConnection:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- public I/O --------------------------------------------------------------------------

    def send(self, req: Request) -> None:
        """Write one request that has no response (produce / multiproduce in 0.7); its
        message sets go to the socket as they are (`encode_request_parts`)."""
        self.send_bytes(encode_request_parts(req))

    def request(self, req: Request, *, max_size: int | None = None) -> bytes:
        """Write one request and return its response frame body (without the int32 size).

        ``max_size`` bounds the body (default ``max_response_size``); a bigger size prefix
        raises `BrokerConnectionError` before allocating.  The whole exchange must complete
        within ``request_timeout``.
        """
        frame = encode_request(req)
        with self._lock:
            self._start_deadline()
            self._write(frame)
            return self._read_frame_split(0, max_size)[1]

    def request_split(self, req: Request, head: int, *,
                      max_size: int | None = None) -> tuple[bytes, bytes]:
        """Like `request`, but return the body as ``(first head bytes, the rest)``.

        The rest is read straight into its own buffer, so a fetch answer's message set is
        not copied again to strip the int16 error code (it matters at GB/s).
        """
        frame = encode_request(req)
        with self._lock:
            self._start_deadline()
            self._write(frame)
            return self._read_frame_split(head, max_size)

    def send_bytes(self, data: bytes | Sequence[bytes]) -> None:
        """Write already-encoded request frames (or pieces of them, in order) that get no
        response."""
        with self._lock:
            self._start_deadline()
            self._write(data)

    def exchange(self, data: bytes | Sequence[bytes], expect: int, *, partial_ok: bool = False,
                 max_size: int | None = None) -> list[bytes]:
        """Write pipelined request frames (bytes, or pieces written in order without being
        joined), then read ``expect`` response bodies in order.

        With ``partial_ok`` a connection closed by the broker ends the read early and the
        answers received so far are returned (the caller counts them: confirmed produce);
        otherwise it raises `ConnectionClosedError`.  Each answer gets its own
        ``request_timeout`` (they are answers to separate requests), counted from the end
        of the previous one (the first: from the start of the write).
        """
        with self._lock:
            self._start_deadline()
            try:
                self._write(data, keep_on_error=partial_ok)
            except BrokerConnectionError as exc:
                if not (partial_ok and isinstance(exc, ConnectionClosedError)):
                    self._drop()
                    raise
                # The broker closed while we were still writing: the answers it sent before
                # closing are still in our receive buffer, so read on until EOF.
            answers: list[bytes] = []
            try:
                for i in range(expect):
                    if i:
                        self._start_deadline()
                    answers.append(self._read_frame_split(0, max_size)[1])
            except ConnectionClosedError:
                if not partial_ok:
                    raise
            return answers

    def read_response(self, *, max_size: int | None = None) -> bytes:
        """Read one more response frame body (for callers that pipelined with `send_bytes`).

        It gets a fresh ``request_timeout``, counted from this call.
        """
        with self._lock:
            self._start_deadline()
            return self._read_frame_split(0, max_size)[1]

    # -- internals ---------------------------------------------------------------------------

    def _error(self, what: str, exc: BaseException | None = None) -> BrokerConnectionError:
        closed = isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError))
        cls = ConnectionClosedError if closed else BrokerConnectionError
        detail = f"{what}: {exc}" if exc is not None else what
        return cls(detail, host=self.host, port=self.port)

    def _start_deadline(self) -> None:
        self._deadline = self._clock() + self.request_timeout

    def _timeout_for_next_call(self) -> float:
        """The socket timeout for the next send/recv: what is left of the request deadline
        (at most ``socket_timeout``); raises, dropping the connection, once it has passed."""
        remaining = self._deadline - self._clock()
        if remaining <= 0:
            self._drop()
            raise BrokerConnectionError(
                f"timed out: response not complete within the request timeout of "
                f"{self.request_timeout}s (broker too slow or trickling)",
                host=self.host, port=self.port)
        return min(self.socket_timeout, remaining)

    def _drop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def _ensure(self) -> socket.socket:
        if self._sock is not None:
            return self._sock
        if self._aborted:
            raise ConnectionClosedError("connection was aborted by its owner", host=self.host,
                                        port=self.port)
        now = self._clock()
        if now < self._retry_at:
            raise BrokerConnectionError(
                f"not reconnecting for another {self._retry_at - now:.3f}s after "
                f"{self._backoff.attempts} failed connect(s)", host=self.host, port=self.port)
        try:
            sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET,
                                 socket.SOCK_STREAM)
        except OSError as exc:
            raise self._error("cannot create socket", exc) from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self.send_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
            if self.recv_buffer > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.recv_buffer)
            sock.settimeout(self.connect_timeout)
            sock.connect((self.host, self.port))
            sock.settimeout(None)  # blocking: timeouts are SO_SNDTIMEO / SO_RCVTIMEO per call
        except OSError as exc:
            sock.close()
            self._retry_at = self._clock() + self._backoff.next_delay()
            what = "connect timed out" if isinstance(exc, TimeoutError) else "cannot connect"
            raise BrokerConnectionError(f"{what}: {exc}", host=self.host,
                                        port=self.port) from exc
        if self._backoff.attempts:
            log.info("reconnected to broker %s:%s after %d failed attempt(s)",
                     self.host, self.port, self._backoff.attempts)
        self._backoff.reset()
        self._retry_at = 0.0
        self.requests_sent = 0
        self.connected_at = self._clock()
        self._sock = sock
        if self._aborted:  # abort() ran while we were connecting
            self._drop()
            raise ConnectionClosedError("connection was aborted by its owner", host=self.host,
                                        port=self.port)
        return sock

    @staticmethod
    def _peer_closed(sock: socket.socket) -> bool:
        """True if the socket is readable: EOF, a reset, or bytes nobody asked for.

        Any of those means the connection must not be reused (unexpected bytes would be
        mistaken for the answer to the next request).
        """
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def _write(self, data: bytes | Sequence[bytes], *, keep_on_error: bool = False) -> None:
        """Write ``data`` -- or its pieces, in order, with ``sendmsg`` (no joined copy) -- all
        within one bound."""
        if self._sock is not None and self._peer_closed(self._sock):
            log.warning("broker %s:%s had closed the connection (a produce sent on it earlier "
                        "was probably rejected, or it idled out); reconnecting",
                        self.host, self.port)
            self._drop()
        sock = self._ensure()
        # one bound for the whole write, as sendall's timeout was: min(socket_timeout, what
        # is left of the request deadline)
        limit = self._clock() + self._timeout_for_next_call()
        pieces = [data] if isinstance(data, (bytes, bytearray, memoryview)) else data
        views = [memoryview(piece) for piece in pieces if len(piece)]
        first = 0  # views[:first] are sent
        try:
            while first < len(views):
                left = limit - self._clock()
                if left <= 0:
                    raise TimeoutError("send timed out")
                _set_timeout(sock, socket.SO_SNDTIMEO, left)
                # blocks in the kernel until it all fits or times out
                sent = (sock.send(views[first]) if first == len(views) - 1
                        else sock.sendmsg(views[first:first + _IOV_MAX]))
                while sent and sent >= len(views[first]):
                    sent -= len(views[first])
                    first += 1
                if sent:
                    views[first] = views[first][sent:]
        except (TimeoutError, BlockingIOError) as exc:  # BlockingIOError: SO_SNDTIMEO, nothing sent
            self._drop()  # part of a frame may be written: the stream is out of sync
            raise self._error(f"send timed out (request timeout {self.request_timeout}s)",
                              TimeoutError("timed out")) from exc
        except OSError as exc:
            if not keep_on_error:
                self._drop()
            raise self._error("send failed", exc) from exc
        finally:
            for view in views:
                view.release()
        self.requests_sent += 1

    def _recv_exact(self, sock: socket.socket, view: memoryview) -> None:
        pos, size = 0, len(view)
        while pos < size:
            timeout = self._timeout_for_next_call()
            try:
                _set_timeout(sock, socket.SO_RCVTIMEO, timeout)
                # all of it in one call unless the timeout, EOF or a reset ends it early
                n = sock.recv_into(view[pos:], size - pos, socket.MSG_WAITALL)
            except (TimeoutError, BlockingIOError) as exc:  # SO_RCVTIMEO with nothing read
                self._drop()
                if timeout < self.socket_timeout:
                    raise self._error(
                        f"timed out: response not complete within the request timeout of "
                        f"{self.request_timeout}s (broker too slow or trickling)") from exc
                raise self._error(
                    f"timed out after {self.socket_timeout}s waiting for a response") from exc
            except OSError as exc:
                self._drop()
                raise self._error("receive failed", exc) from exc
            if n == 0:
                self._drop()
                raise ConnectionClosedError("broker closed the connection", host=self.host,
                                            port=self.port)
            pos += n

    def _read_frame_split(self, head_size: int, max_size: int | None) -> tuple[bytes, bytes]:
        limit = self.max_response_size if max_size is None else max_size
        sock = self._sock
        if sock is None:
            raise ConnectionClosedError("no open connection to read a response from",
                                        host=self.host, port=self.port)
        # The int32 size and the caller's head (e.g. the int16 error) in one read.
        start = self._size_buf if not head_size else bytearray(4 + head_size)
        with memoryview(start) as view:
            self._recv_exact(sock, view)
        (size,) = _SIZE.unpack_from(start)
        if not max(2, head_size) <= size <= limit:
            self._drop()  # checked before allocating: a lying prefix costs nothing
            raise BrokerConnectionError(
                f"protocol error: invalid response size {size}, outside "
                f"{max(2, head_size)}..{limit} for this request (not a 0.7 broker, or the "
                f"stream lost frame sync)", host=self.host, port=self.port)
        head = bytes(start[4:])
        buf = bytearray(size - head_size)
        with memoryview(buf) as view:
            self._recv_exact(sock, view)
        return head, bytes(buf)
