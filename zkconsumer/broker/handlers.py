"""Request handling of the dev broker: one decoded frame in, a response plan out (no sockets).

Job: server/KafkaRequestHandlers.scala -- produce, multiproduce, fetch, multifetch and
offsets with every client-visible behaviour of the 0.7.2 broker (REFERENCE §4.2, §4.8).

The result of `RequestHandler.handle` is ``None`` (produce: 0.7 never answers one) or a
`Response`: a list of byte strings and `FetchRegion`s that the server writes in order (bytes
with ``sendall``, regions with ``os.sendfile``).  **Any exception means "close the
connection"**, exactly as the reference's socket processor closes the socket on any exception
a handler throws: bad produce (illegal topic, partition out of range, CRC mismatch anywhere,
inner sets included, bad magic, unknown codec, undecodable compression, truncated first
message), offsets errors, undecodable frames.

Per-row behaviour that is *not* an exception:
    * fetch errors are answered in-band: illegal topic -1, partition out of range 3, offset
      out of range 1 (`BrokerError.code`); no log yet -> empty, error 0, nothing created;
    * a produce whose shallow payload exceeds ``max.message.size`` is dropped with a WARNING,
      after its log was created (so the directory, empty segment and ZooKeeper registration
      appear anyway);
    * a trailing partial message of a produce is cut off; an empty set creates the log.
    * In a multiproduce the parts are applied in order, so parts before a bad one are written.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from zkconsumer.broker.log import EMPTY_REGION, FetchRegion
from zkconsumer.broker.manager import LogManager
from zkconsumer.errors import BrokerError, DecodeError, InvalidMessageSizeError
from zkconsumer.protocol import (
    DECODER,
    EARLIEST_TIME,
    LATEST_TIME,
    RANDOM_PARTITION,
    FetchRequest,
    MultiFetchRequest,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    decode_request,
    decompress,
    encode_offsets_response,
    validate_message_set,
)
from zkconsumer.protocol.message import codec_of, read_shallow

__all__ = ["BrokerStats", "RequestHandler", "Response", "check_message_set"]

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
_SIZE_ERROR = struct.Struct(">ih")  # int32 size, int16 error: every fetch (part) header
#: Cap on one wrapper's inflated size when validating a produce (a decompression-bomb guard;
#: the reference has none, but 0.7 producers never send wrappers anywhere near this).
MAX_INFLATED = 256 * 1024 * 1024
#: Wrappers nested deeper than this close the connection (the reference recurses without a
#: limit; nobody nests, and a self-reproducing gzip would recurse forever).
MAX_NESTING = 8


@dataclass
class Response:
    """What to write back: ``bytes`` pieces and file regions, in order.

    ``close_after``: close the connection once written (what the reference ends up doing
    when a fetch carries a negative maxSize: it writes the header, then fails).
    """

    parts: list[bytes | FetchRegion]
    close_after: bool = False

    @property
    def size(self) -> int:
        return sum(len(p) if isinstance(p, bytes) else max(p.length, 0) for p in self.parts)


@dataclass
class BrokerStats:
    """Counters (BrokerTopicStat): handy in tests and the benchmark."""

    produce_requests: int = 0
    fetch_requests: int = 0
    offsets_requests: int = 0
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    dropped_sets: int = 0
    failed_produce: int = 0
    by_topic: dict[str, int] = field(default_factory=dict)


class MessageSizeTooLarge(Exception):
    """Internal: a shallow payload exceeds max.message.size (the set is dropped, not fatal)."""


def check_message_set(data: bytes, max_message_size: int) -> tuple[int, int]:
    """Validate a produced set as Log.append does; return ``(valid_bytes, deep_messages)``.

    First a shallow pass (verifyMessageSize): every entry CRC-checked, each payload against
    ``max_message_size`` -> `MessageSizeTooLarge`.  Then the deep count (Log.append's
    ``for(messageAndOffset <- messages)``): every compressed wrapper inflated and its inner
    set CRC-checked, recursively.  Codec errors propagate.  In every set, outer or inner, a
    first message whose length does not fit is an error and a later one is a partial tail,
    ignored; fewer than 4 bytes are no message at all (ByteBufferMessageSet.internalIterator).

    Fast path: what producers send -- whole, valid sets -- is checked by the protocol's
    `validate_message_set` (the compiled walk when built: every CRC, inner sets included).
    Only when that one accepts the *whole* set with every payload within the limit is its
    answer used; anything else (a partial tail, corruption, an oversized payload) goes through
    the walk below, which alone decides the reference's exact errors and edge cases.
    """
    size = len(data)
    if DECODER == "compiled" and size >= 4:
        try:
            info = validate_message_set(data, max_inflated=MAX_INFLATED)
        except DecodeError:
            info = None
        if (info is not None and info.valid_bytes == size
                and info.max_shallow_payload <= max_message_size):
            return size, info.deep_count
    pos = 0
    deep = 0
    wrappers: list[tuple[int, int, bytes]] = []
    while True:
        entry = _read_entry(data, pos, size, 0)
        if entry is None:
            break
        end, magic, attributes, payload = entry
        if len(payload) > max_message_size:
            raise MessageSizeTooLarge(
                f"payload size of {len(payload)} larger than {max_message_size}")
        if magic == 1 and attributes & 0x03:
            wrappers.append((pos, attributes, payload))
        else:
            deep += 1
        pos = end
    if pos == 0 and size >= 4:
        raise InvalidMessageSizeError(
            "the first message does not fit the message set (possible causes (1) a single "
            "message larger than the request; (2) corruption)", 0)
    budget = [MAX_INFLATED]
    for start, attributes, payload in wrappers:
        deep += _inner_count(codec_of(attributes, start), payload, start, budget, 1)
    return pos, deep


def _read_entry(buf: bytes, pos: int, size: int,
                base: int) -> tuple[int, int, int, bytes] | None:
    """read_shallow, except that a later entry that does not fit is a partial tail even when
    its length is below a header (internalIterator checks the fit before the length)."""
    if pos > 0 and pos + 4 <= size:
        (n,) = _INT32.unpack_from(buf, pos)
        if 0 <= n < 5 and pos + 4 + n > size:
            return None
    return read_shallow(buf, pos, size, base)


def _inner_count(codec: int, payload: bytes, offset: int, budget: list[int],
                 depth: int) -> int:
    """Deep messages inside one compressed wrapper (CompressionUtils.decompress + iterate)."""
    if depth > MAX_NESTING:
        raise InvalidMessageSizeError("compressed messages nested too deeply", offset)
    inner = decompress(codec, payload, max_size=budget[0])
    budget[0] -= len(inner)
    size = len(inner)
    pos = count = 0
    while True:
        entry = _read_entry(inner, pos, size, offset)
        if entry is None:
            break
        end, magic, attributes, inner_payload = entry
        if magic == 1 and attributes & 0x03:
            count += _inner_count(codec_of(attributes, offset), inner_payload, offset, budget,
                                  depth + 1)
        else:
            count += 1
        pos = end
    if pos == 0 and size >= 4:
        raise InvalidMessageSizeError("compressed set ends inside its first message", offset)
    return count


class RequestHandler:
    """Turns request frames into log operations and response plans."""

    def __init__(self, manager: LogManager) -> None:
        self.manager = manager
        self.max_message_size = manager.config.max_message_size
        self.stats = BrokerStats()

    def handle(self, frame: bytes | bytearray) -> Response | None:
        """Handle one frame (without its size prefix).  Raises -> close the connection."""
        req = decode_request(frame, lenient=True)
        if isinstance(req, FetchRequest):
            self.stats.fetch_requests += 1
            return self._fetch(req)
        if isinstance(req, MultiFetchRequest):
            self.stats.fetch_requests += 1
            return self._multifetch(req.fetches)
        if isinstance(req, ProduceRequest):
            self.stats.produce_requests += 1
            self._produce(req)
            return None
        if isinstance(req, MultiProduceRequest):
            self.stats.produce_requests += 1
            for part in req.produces:
                self._produce(part)
            return None
        if not isinstance(req, OffsetsRequest):  # decode_request returns one of five types
            raise TypeError(f"unexpected request {req!r}")
        self.stats.offsets_requests += 1
        return Response([self._offsets(req)])

    # ------------------------------------------------------------------ produce
    def _produce(self, req: ProduceRequest) -> None:
        partition = req.partition
        if partition == RANDOM_PARTITION:
            partition = self.manager.choose_random_partition(req.topic)
        try:
            plog = self.manager.get_or_create_log(req.topic, partition)
            data = req.messages
            try:
                valid, deep = check_message_set(data, self.max_message_size)
            except MessageSizeTooLarge as exc:
                log.warning("%s on %s:%d", exc, req.topic, partition)
                self.stats.dropped_sets += 1
                self.stats.failed_produce += 1
                return
            plog.append(memoryview(data)[:valid] if valid < len(data) else data, deep)
        except Exception:
            self.stats.failed_produce += 1
            log.warning("error processing produce request on %s:%d; closing the connection",
                        req.topic, partition, exc_info=log.isEnabledFor(logging.DEBUG))
            raise
        self.stats.messages_in += deep
        self.stats.bytes_in += valid

    # ------------------------------------------------------------------ fetch
    def _read(self, req: FetchRequest) -> tuple[int, FetchRegion]:
        """readMessageSet: (error code, region); errors are answered in-band."""
        try:
            plog = self.manager.get_log(req.topic, req.partition)
            if plog is None:
                return 0, EMPTY_REGION
            return 0, plog.read(req.offset, req.max_size)
        except BrokerError as exc:
            log.debug("fetch %s: %s", req, exc)
            return exc.code, EMPTY_REGION
        except Exception as exc:  # InvalidTopicException etc. are unmapped: -1
            log.debug("fetch %s: %s", req, exc)
            return -1, EMPTY_REGION

    def _fetch(self, req: FetchRequest) -> Response:
        error, region = self._read(req)
        header = _SIZE_ERROR.pack(_clamp(region.length + 2), error)
        if region.length < 0:
            return Response([header], close_after=True)
        self.stats.bytes_out += region.length
        return Response([header, region] if region.length else [header])

    def _multifetch(self, fetches: Sequence[FetchRequest]) -> Response:
        reads = [self._read(f) for f in fetches]
        total = 2 + sum(6 + region.length for _, region in reads)
        parts: list[bytes | FetchRegion] = [_SIZE_ERROR.pack(_clamp(total), 0)]
        for error, region in reads:
            parts.append(_SIZE_ERROR.pack(_clamp(region.length + 2), error))
            if region.length < 0:
                return Response(parts, close_after=True)
            if region.length:
                parts.append(region)
                self.stats.bytes_out += region.length
        return Response(parts)

    # ------------------------------------------------------------------ offsets
    def _offsets(self, req: OffsetsRequest) -> bytes:
        plog = self.manager.get_log(req.topic, req.partition)  # raises -> close
        if plog is None:
            offsets = [0] if req.time in (LATEST_TIME, EARLIEST_TIME) else []
        elif req.max_offsets < 0:
            raise InvalidMessageSizeError(f"negative max offsets {req.max_offsets}")
        else:
            offsets = plog.offsets_before(req.time, req.max_offsets)
        return encode_offsets_response(offsets)


def _clamp(n: int) -> int:
    """Wrap to a Java int, as ``size.asInstanceOf[Int]`` does."""
    return (n + 2**31) % 2**32 - 2**31

