"""Kafka 0.7 requests: frozen value types, ``encode_request`` and ``decode_request``.

Frame (network/BoundedByteBufferSend.scala)::

    int32 size        bytes after this field
    int16 type        RequestType
    body:
      Produce       string topic | int32 partition | int32 set_size | set_size bytes
      MultiProduce  int16 count | count x Produce body
      Fetch         string topic | int32 partition | int64 offset | int32 max_size
      MultiFetch    int16 count | count x Fetch body
      Offsets       string topic | int32 partition | int64 time | int32 max_offsets
    string = int16 length | bytes

Invariants
    * Encoding validates topics (`validate_topic`: ASCII only, so the int16 length is both the
      UTF-16 and the byte length, as 0.7 requires) and field ranges; misuse raises
      `LocalProtocolError`.  No response exists for Produce/MultiProduce.
    * Decoding is for the broker side: it succeeds for *any* topic string (invalid UTF-8 is
      replaced like Java's ``new String(bytes, "UTF-8")``) so the broker can answer error -1
      for an illegal name; it raises only for structure: `TruncatedError` for a short frame,
      `DecodeError` for an unknown type, a negative length/count, or trailing bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from zkconsumer.errors import DecodeError, LocalProtocolError, TruncatedError
from zkconsumer.protocol.constants import RequestType
from zkconsumer.protocol.topics import validate_topic

__all__ = [
    "FetchRequest",
    "MultiFetchRequest",
    "MultiProduceRequest",
    "OffsetsRequest",
    "ProduceRequest",
    "Request",
    "decode_request",
    "encode_request",
    "encode_request_parts",
    "request_type_of",
]

_SIZE_TYPE = struct.Struct(">ih")  # frame size, request type
_INT16 = struct.Struct(">h")  # string length / count
_PRODUCE = struct.Struct(">ii")  # partition, set_size
_FETCH = struct.Struct(">iqi")  # partition, offset, max_size
_OFFSETS = struct.Struct(">iqi")  # partition, time, max_offsets
_MAX_COUNT = 0x7FFF


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    """Append a message set (already encoded bytes) to one partition.  No response."""

    topic: str
    partition: int
    messages: bytes


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Read up to ``max_size`` bytes of a partition's log from byte ``offset``."""

    topic: str
    partition: int
    offset: int
    max_size: int


@dataclass(frozen=True, slots=True)
class MultiFetchRequest:
    """Several fetches in one round trip; answered in request order."""

    fetches: tuple[FetchRequest, ...]


@dataclass(frozen=True, slots=True)
class MultiProduceRequest:
    """Several produces in one frame; the broker applies them in order, stops at a bad one."""

    produces: tuple[ProduceRequest, ...]


@dataclass(frozen=True, slots=True)
class OffsetsRequest:
    """Offsets (segment starts, descending) before ``time`` (ms, or LATEST/EARLIEST_TIME)."""

    topic: str
    partition: int
    time: int
    max_offsets: int


Request = (ProduceRequest | FetchRequest | MultiFetchRequest | MultiProduceRequest
           | OffsetsRequest)


# --------------------------------------------------------------------------------------------
# encoding
# --------------------------------------------------------------------------------------------


def _topic(topic: str) -> bytes:
    validate_topic(topic)
    raw = topic.encode("ascii")
    return _INT16.pack(len(raw)) + raw


def _produce_parts(req: ProduceRequest) -> tuple[bytes, bytes]:
    """A produce body as (its fields, its message set): the set is not copied."""
    messages = req.messages if type(req.messages) is bytes else bytes(req.messages)
    return _topic(req.topic) + _PRODUCE.pack(req.partition, len(messages)), messages


def _fetch_body(req: FetchRequest) -> bytes:
    return _topic(req.topic) + _FETCH.pack(req.partition, req.offset, req.max_size)


def _count(n: int, what: str) -> bytes:
    if n > _MAX_COUNT:
        raise LocalProtocolError(f"{what} carries {n} parts, more than an int16 count allows")
    return _INT16.pack(n)


def _body(req: Request) -> tuple[RequestType, list[bytes]]:
    if isinstance(req, ProduceRequest):
        return RequestType.PRODUCE, list(_produce_parts(req))
    if isinstance(req, FetchRequest):
        return RequestType.FETCH, [_fetch_body(req)]
    if isinstance(req, MultiFetchRequest):
        parts = [_count(len(req.fetches), "MultiFetchRequest")]
        parts.extend(_fetch_body(f) for f in req.fetches)
        return RequestType.MULTIFETCH, [b"".join(parts)]
    if isinstance(req, MultiProduceRequest):
        parts = [_count(len(req.produces), "MultiProduceRequest")]
        for p in req.produces:
            parts.extend(_produce_parts(p))
        return RequestType.MULTIPRODUCE, parts
    if isinstance(req, OffsetsRequest):
        return RequestType.OFFSETS, [_topic(req.topic) + _OFFSETS.pack(
            req.partition, req.time, req.max_offsets)]
    raise LocalProtocolError(f"not a Kafka 0.7 request: {req!r}")


def encode_request_parts(req: Request) -> list[bytes]:
    """The request frame as pieces to write one after the other (int32 size + int16 type +
    the body's fields, then each message set as it is): a socket's ``sendmsg`` writes them
    without joining.  Why: a produce's message set is megabytes, and copying it into a frame
    (a fresh allocation each time, first touched page by page) cost more than sending it."""
    try:
        kind, body = _body(req)
        head = _SIZE_TYPE.pack(2 + sum(map(len, body)), kind)
        return [head + body[0], *body[1:]]
    except struct.error as exc:
        raise LocalProtocolError(f"field out of range in {req!r}: {exc}") from exc


def encode_request(req: Request) -> bytes:
    """The whole request frame: int32 size + int16 type + body (`encode_request_parts`,
    joined)."""
    parts = encode_request_parts(req)
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------------------------
# decoding
# --------------------------------------------------------------------------------------------


class _Reader:
    """Bounds-checked cursor over one frame; every short read is a TruncatedError."""

    __slots__ = ("buf", "lenient", "pos", "size")

    def __init__(self, buf: bytes | memoryview, lenient: bool = False) -> None:
        self.buf = buf
        self.pos = 0
        self.size = len(buf)
        self.lenient = lenient

    def take(self, st: struct.Struct, what: str) -> tuple[int, ...]:
        if self.pos + st.size > self.size:
            raise TruncatedError(f"request ends inside {what}", self.pos)
        values = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return values

    def raw(self, n: int, what: str) -> bytes:
        if n < 0:
            raise DecodeError(f"negative length {n} for {what}", self.pos)
        if self.pos + n > self.size:
            raise TruncatedError(f"request ends inside {what}", self.pos)
        out = bytes(self.buf[self.pos:self.pos + n])  # a bytes slice: that slice, no 2nd copy
        self.pos += n
        return out

    def string(self, what: str) -> str:
        (n,) = self.take(_INT16, f"{what} length")
        if n < 0 and self.lenient:
            return ""  # Utils.readShortString: a negative length is a null string
        return self.raw(n, what).decode("utf-8", "replace")

    def count(self, what: str) -> int:
        (n,) = self.take(_INT16, what)
        if n < 0:
            raise DecodeError(f"negative {what} {n}", self.pos - 2)
        return n


def _read_produce(r: _Reader) -> ProduceRequest:
    topic = r.string("topic")
    partition, set_size = r.take(_PRODUCE, "produce header")
    return ProduceRequest(topic, partition, r.raw(set_size, "message set"))


def _read_fetch(r: _Reader) -> FetchRequest:
    topic = r.string("topic")
    partition, offset, max_size = r.take(_FETCH, "fetch fields")
    return FetchRequest(topic, partition, offset, max_size)


def request_type_of(frame: bytes | bytearray | memoryview) -> RequestType:
    """The request type of a frame (without its size prefix), without decoding the body."""
    if len(frame) < 2:
        raise TruncatedError("request frame shorter than its type field", 0)
    (kind,) = _INT16.unpack_from(frame, 0)
    try:
        return RequestType(kind)
    except ValueError:
        raise DecodeError(f"unknown request type {kind}", 0) from None


def decode_request(frame: bytes | bytearray | memoryview, *, lenient: bool = False) -> Request:
    """Decode a request frame WITHOUT its int32 size prefix (what `FrameReader` returns).

    ``lenient=True`` reads the frame the way the 0.7.2 broker does (each ``readFrom`` takes
    its fields off a ByteBuffer), which the dev broker needs to answer exactly as the real
    one: bytes after the last field are ignored, and a negative topic length is
    ``readShortString``'s null string, returned as ``""`` (an illegal topic: a fetch answers
    error -1, a produce or offsets request closes the connection).  Everything a ByteBuffer
    read would fail on still raises: a short frame, an unknown type, a negative count or
    message-set size.
    """
    # a view, not a copy, of a bytearray frame: each field is copied out of it once (``raw``)
    data = frame if type(frame) is bytes else memoryview(frame)
    kind = request_type_of(data)
    r = _Reader(data, lenient)
    r.pos = 2
    req: Request
    if kind == RequestType.PRODUCE:
        req = _read_produce(r)
    elif kind == RequestType.FETCH:
        req = _read_fetch(r)
    elif kind == RequestType.MULTIFETCH:
        n = r.count("fetch count")
        req = MultiFetchRequest(tuple(_read_fetch(r) for _ in range(n)))
    elif kind == RequestType.MULTIPRODUCE:
        n = r.count("produce count")
        req = MultiProduceRequest(tuple(_read_produce(r) for _ in range(n)))
    else:
        topic = r.string("topic")
        partition, time, max_offsets = r.take(_OFFSETS, "offsets fields")
        req = OffsetsRequest(topic, partition, time, max_offsets)
    if r.pos != r.size and not lenient:
        raise DecodeError(f"{r.size - r.pos} trailing bytes after the {kind.name} request",
                          r.pos)
    return req
