"""`SimpleConsumer`: fetch, multifetch and offsets against one broker, and a robust iterator.

Job: the 0.7 SimpleConsumer (consumer/SimpleConsumer.scala) plus the loop every user of it had
to write, done right for what a real 0.7.2 broker returns (REFERENCE §4.2, §4.8):

* a fetch answer ends wherever ``max_size`` or the *segment* ends, usually inside a message.
  The iterator keeps fetching from ``offset + valid_bytes``; a short answer is **not** the end
  of the log (fetch never crosses a segment boundary).  End of log = an empty answer.
* a non-empty answer holding no whole message means one message is larger than the fetch size.
  The iterator grows the size (doubling, at least to the declared message size) up to
  ``max_fetch_size`` and then raises `MessageTooLargeError` naming topic, partition and offset:
  never the endless loop of 0.7.0 (KAFKA-160).
* corrupt data (CRC, magic, size) ends the iteration *at the corrupt message*: the whole
  messages in front of it in the same answer are yielded first, then the `DecodeError` (its
  ``offset`` is the corrupt message's) is raised.
* when the very first fetch of an iteration holds no whole message, the start offset is
  checked against the broker (`zkconsumer.client.alignment`): an offset inside a message
  raises `MisalignedOffsetError` naming the boundaries around it, instead of growing the
  fetch to ``max_fetch_size`` and blaming the message size.
* offsets are byte positions; yielded `FetchedMessage` offsets follow the reference, including
  compressed wrappers (inner messages get the wrapper start, the last one its end), because
  they come straight from `decode_message_set`.

Idempotent requests (fetch, multifetch, offsets) are retried once on a fresh connection when an
established connection turns out to be broken, like the Scala SimpleConsumer: a broker restart
between two fetches should not surface as an error.

A response frame that arrived whole but does not decode (a truncated offsets list, a
multifetch with a broken part or with a different number of parts than requested) means the
peer is not a sane 0.7 broker or the stream lost sync: it is raised as `BrokerConnectionError`
naming ``host:port`` (the codec error is its ``__cause__``) and the connection is dropped, so
callers handle it like any other broken broker (back off, reconnect) instead of dying on a
`DecodeError`.  Every request passes `BrokerConnection` the largest answer a 0.7 broker can give
to it (a fetch: its ``max_size`` + the error code; REFERENCE §4.2), so a size prefix beyond
that is refused before anything is allocated, and the whole exchange must finish within
``request_timeout`` (default: ``socket_timeout``).  Not thread-safe beyond what
`BrokerConnection` serialises: use one SimpleConsumer per thread.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import NamedTuple, TypeVar

from zkconsumer.client.alignment import check_alignment, misaligned_error
from zkconsumer.client.connection import BrokerConnection
from zkconsumer.errors import (
    BrokerConnectionError,
    BrokerError,
    ConfigurationError,
    ConnectionClosedError,
    DecodeError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    UnknownBrokerError,
)
from zkconsumer.protocol import (
    EARLIEST_TIME,
    LATEST_TIME,
    FetchRequest,
    FetchResponse,
    MultiFetchRequest,
    OffsetsRequest,
    Request,
    decode_multifetch_response,
    decode_offsets_response,
)
from zkconsumer.protocol.batch import MessageBatch, decode_batch_valid_prefix
from zkconsumer.protocol.messageset import DecodedSet
from zkconsumer.protocol.prefix import decode_valid_prefix

#: What one fetch decodes to: a `DecodedSet` (iter_batches) or a `MessageBatch` (iter_columns).
_D = TypeVar("_D", DecodedSet, MessageBatch)

__all__ = [
    "FetchedMessage",
    "SimpleConsumer",
    "fetch_response_bound",
    "multifetch_response_bound",
    "offsets_response_bound",
    "query_offsets",
]

_LEN = struct.Struct(">i")  # int32 length prefix of a message entry
_ERROR = struct.Struct(">h")  # int16 error code opening a fetch response body
#: Added to every computed response bound: the bounds are exact for a 0.7.2 broker
#: (FileMessageSet.read never returns more than maxSize), the slack only forgives a peer
#: that pads an answer a little.  A lost frame sync or a lying size prefix is far above it.
_SLACK = 4096


def fetch_response_bound(max_size: int) -> int:
    """Largest FETCH response body: int16 error + at most ``max_size`` message-set bytes."""
    return 2 + max(max_size, 0) + _SLACK


def multifetch_response_bound(fetches: Sequence[FetchRequest]) -> int:
    """Largest MULTIFETCH response body: int16 error, then per part int32 size + a fetch body."""
    return 2 + sum(4 + 2 + max(f.max_size, 0) for f in fetches) + _SLACK


def offsets_response_bound(max_offsets: int) -> int:
    """Largest OFFSETS response body: int16 error, int32 count, at most max_offsets int64s."""
    return 2 + 4 + 8 * max(max_offsets, 0) + _SLACK


class FetchedMessage(NamedTuple):
    """One (deep) message: its byte ``offset``, the ``next_offset`` to commit, the payload."""

    offset: int
    next_offset: int
    value: bytes


class SimpleConsumer:
    """A client of one broker for fetch / multifetch / offsets requests."""

    def __init__(self, host: str, port: int, *, socket_timeout: float = 30.0,
                 buffer_size: int = 65536, fetch_size: int = 1048576,
                 max_fetch_size: int = 16 * 1024 * 1024, connect_timeout: float = 5.0,
                 idle_wait: float = 0.1, request_timeout: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if fetch_size < 1:
            raise ConfigurationError(f"fetch_size must be >= 1, got {fetch_size}")
        if max_fetch_size < fetch_size:
            raise ConfigurationError(
                f"max_fetch_size ({max_fetch_size}) must be >= fetch_size ({fetch_size})")
        self.host = host
        self.port = port
        self.fetch_size = fetch_size
        self.max_fetch_size = max_fetch_size
        self.idle_wait = idle_wait
        self._sleep = sleep
        self.conn = BrokerConnection(host, port, connect_timeout=connect_timeout,
                                     socket_timeout=socket_timeout, recv_buffer=buffer_size,
                                     request_timeout=request_timeout)

    def __repr__(self) -> str:
        return f"<SimpleConsumer {self.host}:{self.port}>"

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- requests ----------------------------------------------------------------------------

    def _request(self, req: Request, max_size: int) -> bytes:
        was_connected = self.conn.connected
        try:
            return self.conn.request(req, max_size=max_size)
        except BrokerConnectionError:
            if not was_connected:
                raise
            # A connection that worked before broke (broker restarted, idle close): retry once.
            return self.conn.request(req, max_size=max_size)

    def _request_fetch(self, req: FetchRequest) -> tuple[int, bytes]:
        was_connected = self.conn.connected
        bound = fetch_response_bound(req.max_size)
        try:
            head, data = self.conn.request_split(req, 2, max_size=bound)
        except BrokerConnectionError:
            if not was_connected:
                raise
            head, data = self.conn.request_split(req, 2, max_size=bound)
        (error,) = _ERROR.unpack(head)
        return error, data

    def fetch(self, topic: str, partition: int, offset: int,
              max_size: int | None = None) -> FetchResponse:
        """One fetch; raises the typed `BrokerError` (with topic/partition/offset) on an error."""
        size = self.fetch_size if max_size is None else max_size
        error, data = self._request_fetch(FetchRequest(topic, partition, offset, size))
        if error:
            raise BrokerError.for_code(error, topic=topic, partition=partition, offset=offset)
        return FetchResponse(error, data)

    def multifetch(self, fetches: Sequence[FetchRequest]) -> list[FetchResponse]:
        """One MULTIFETCH; answers in request order.  Per-set errors are *not* raised."""
        if not fetches:
            return []
        body = self._request(MultiFetchRequest(tuple(fetches)),
                             multifetch_response_bound(fetches))
        try:
            resp = decode_multifetch_response(body)
        except DecodeError as exc:
            raise self._garbled("multifetch", exc) from exc
        if len(resp.responses) != len(fetches):
            raise self._garbled(f"multifetch ({len(resp.responses)} part(s) for "
                                f"{len(fetches)} fetch(es))")
        if resp.error:
            raise BrokerError.for_code(resp.error)
        return list(resp.responses)

    def offsets(self, topic: str, partition: int, time: int, max_offsets: int = 1) -> list[int]:
        """Offsets before ``time`` (ms, or LATEST_TIME / EARLIEST_TIME), descending.

        A 0.7 broker answers an invalid topic or partition here by closing the connection, so
        that arrives as `ConnectionClosedError` with a message saying so.
        """
        req = OffsetsRequest(topic, partition, time, max_offsets)
        try:
            body = self._request(req, offsets_response_bound(max_offsets))
        except ConnectionClosedError as exc:
            raise ConnectionClosedError(
                f"broker closed the connection on an offsets request for {topic}/{partition} "
                f"(invalid topic or partition number?)", host=self.host, port=self.port
            ) from exc
        try:
            resp = decode_offsets_response(body)
        except DecodeError as exc:
            raise self._garbled("offsets", exc) from exc
        if resp.error:
            raise BrokerError.for_code(resp.error, topic=topic, partition=partition)
        return list(resp.offsets)

    def _garbled(self, what: str, exc: DecodeError | None = None) -> BrokerConnectionError:
        """An undecodable response: drop the connection (it cannot be trusted any more)."""
        self.conn.close()
        detail = f": {exc}" if exc is not None else ""
        return BrokerConnectionError(f"undecodable {what} response{detail}", host=self.host,
                                     port=self.port)

    def _single_offset(self, topic: str, partition: int, time: int) -> int:
        offsets = self.offsets(topic, partition, time, 1)
        if not offsets:
            raise UnknownBrokerError("broker returned no offset", topic=topic,
                                     partition=partition)
        return offsets[0]

    def earliest_offset(self, topic: str, partition: int) -> int:
        """Start of the first segment (0 for a partition without a log)."""
        return self._single_offset(topic, partition, EARLIEST_TIME)

    def latest_offset(self, topic: str, partition: int) -> int:
        """The flushed end of the log: the next message will be written here."""
        return self._single_offset(topic, partition, LATEST_TIME)

    # -- iteration ---------------------------------------------------------------------------

    def iter_batches(self, topic: str, partition: int, offset: int, *,
                     stop_at_end: bool = True) -> Iterator[tuple[int, list[tuple[int, int, bytes]]]]:
        """Fetch from ``offset`` on; yield ``(next_fetch_offset, [(offset, next, value), ...])``.

        The fast path under `iter_messages`: one list of plain tuples per fetch, no per-message
        object.  ``next_fetch_offset`` is where the next fetch starts (past the last whole
        shallow message).  Handles partial tails, segment ends and oversized messages as the
        module docstring says; with ``stop_at_end=False`` it waits ``idle_wait`` seconds at the
        end of the log and polls again.
        """
        for next_offset, decoded in self._iter_decoded(topic, partition, offset, stop_at_end,
                                                       decode_valid_prefix):
            yield next_offset, decoded.messages

    def iter_columns(self, topic: str, partition: int, offset: int, *,
                     stop_at_end: bool = True) -> Iterator[tuple[int, MessageBatch]]:
        """`iter_batches` with each fetch as a `MessageBatch` (offsets and payloads in columns).

        The fastest loop: with the compiled decoder no Python object is made per message.
        Same fetches, checks, errors and ``next_fetch_offset`` as `iter_batches`.
        """
        yield from self._iter_decoded(topic, partition, offset, stop_at_end,
                                      decode_batch_valid_prefix)

    def _iter_decoded(self, topic: str, partition: int, offset: int, stop_at_end: bool,
                      decode: Callable[[bytes, int], tuple[_D, DecodeError | None]],
                      ) -> Iterator[tuple[int, _D]]:
        """The fetch loop of `iter_batches` / `iter_columns`; ``decode`` is a valid-prefix
        decoder (the whole messages before a corrupt one, and its error)."""
        size = self.fetch_size
        start_checked = False  # offsets reached by walking are boundaries; the first may not be
        while True:
            try:
                data = self.fetch(topic, partition, offset, size).messages
            except OffsetOutOfRangeError as exc:
                raise self._out_of_range(topic, partition, offset) from exc
            if not data:
                if stop_at_end:
                    return
                self._sleep(self.idle_wait)
                continue
            decoded, error = decode(data, offset)
            if decoded.valid_bytes == 0:
                if not start_checked:
                    start_checked = True
                    self._raise_if_misaligned(topic, partition, offset, error)
                if error is not None:
                    raise error
                size = self._grow(topic, partition, offset, size, data)
                continue
            start_checked = True
            offset += decoded.valid_bytes
            size = self.fetch_size
            yield offset, decoded
            if error is not None:
                raise error  # the valid prefix went out first; the next fetch would fail here

    def _raise_if_misaligned(self, topic: str, partition: int, offset: int,
                             error: DecodeError | None) -> None:
        """The first fetch of an iteration found no whole message: is ``offset`` inside one?

        Undecided or unreachable: the caller goes on as before (grow, or raise ``error``).
        """
        try:
            verdict = check_alignment(self, topic, partition, offset)
        except (BrokerError, BrokerConnectionError):
            return
        if verdict.aligned is False:
            raise misaligned_error(topic, partition, offset, verdict) from error

    def iter_messages(self, topic: str, partition: int, offset: int, *,
                      stop_at_end: bool = True) -> Iterator[FetchedMessage]:
        """Every message of one partition from byte ``offset`` on, as `FetchedMessage`.

        Stops at the end of the log (an empty fetch) unless ``stop_at_end`` is false, in which
        case it follows the log like ``tail -f``.  Raises `OffsetOutOfRangeError` (with the
        valid range when the broker tells it) and `MessageTooLargeError`.
        """
        make = FetchedMessage._make
        for _, messages in self.iter_batches(topic, partition, offset, stop_at_end=stop_at_end):
            yield from map(make, messages)

    def _grow(self, topic: str, partition: int, offset: int, size: int, data: bytes) -> int:
        """The next fetch size when no whole message fit in ``size`` bytes."""
        needed = size * 2
        if len(data) >= 4:
            (length,) = _LEN.unpack_from(data)
            needed = max(needed, 4 + length)
        else:
            length = None
        if size >= self.max_fetch_size or (length is not None
                                           and 4 + length > self.max_fetch_size):
            declared = f"{4 + length} bytes" if length is not None else "unknown size"
            raise MessageTooLargeError(
                f"message at {topic}/{partition} offset {offset} ({declared}) does not fit in "
                f"max_fetch_size={self.max_fetch_size}; raise it or skip the message",
                topic=topic, partition=partition, offset=offset,
                size=4 + length if length is not None else None)
        return min(needed, self.max_fetch_size)

    def _out_of_range(self, topic: str, partition: int, offset: int) -> OffsetOutOfRangeError:
        try:
            valid = (f"the log holds [{self.earliest_offset(topic, partition)}, "
                     f"{self.latest_offset(topic, partition)}]")
        except (BrokerError, BrokerConnectionError):
            valid = "the valid range could not be read"
        return OffsetOutOfRangeError(f"offset out of range; {valid}", topic=topic,
                                     partition=partition, offset=offset)


def query_offsets(host: str, port: int, topic: str, partition: int, time: int,
                  max_offsets: int = 1, *, socket_timeout: float = 30.0) -> list[int]:
    """One-shot offsets request (``zkconsumer offsets --broker``): descending byte offsets."""
    with SimpleConsumer(host, port, socket_timeout=socket_timeout) as consumer:
        return consumer.offsets(topic, partition, time, max_offsets)
