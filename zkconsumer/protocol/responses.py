"""Kafka 0.7 responses: value types, encoders (broker side) and decoders (client side).

Layouts (server/MessageSetSend.scala, MultiMessageSetSend.scala, api/OffsetRequest.scala)::

    Fetch        int32 size(=2+n) | int16 error | n bytes of message set
    MultiFetch   int32 size | int16 error=0 | per fetch, in request order:
                                              int32 size(=2+n) | int16 error | n bytes
    Offsets      int32 size | int16 error | int32 count | count x int64 (descending)

Produce requests have no response at all.

Terminology: a *frame* starts with the int32 size; its *body* is everything after that size.
Encoders return whole frames; ``*_header`` helpers return just the bytes before a message set
so the broker can ``sendfile`` the set itself.  Decoders take the body (what `FrameReader`
returns) and raise `TruncatedError` / `DecodeError` on malformed input, never anything else.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from zkconsumer.errors import BrokerError, DecodeError, LocalProtocolError, TruncatedError

__all__ = [
    "FetchResponse",
    "MultiFetchResponse",
    "OffsetsResponse",
    "decode_fetch_response",
    "decode_multifetch_response",
    "decode_offsets_response",
    "encode_fetch_response",
    "encode_multifetch_response",
    "encode_offsets_response",
    "fetch_response_header",
    "multifetch_part_header",
    "multifetch_response_header",
    "raise_for_error",
]

_SIZE_ERROR = struct.Struct(">ih")  # size, error
_ERROR = struct.Struct(">h")  # error
_ERROR_COUNT = struct.Struct(">hi")  # error, count
_INT32 = struct.Struct(">i")  # size


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """One message set (possibly ending in a partial message) and its error code."""

    error: int
    messages: bytes


@dataclass(frozen=True, slots=True)
class MultiFetchResponse:
    """The per-fetch answers, in request order; ``error`` is the (always 0) top-level code."""

    error: int
    responses: tuple[FetchResponse, ...]


@dataclass(frozen=True, slots=True)
class OffsetsResponse:
    """Offsets in the order the broker sent them (0.7 sends them descending)."""

    error: int
    offsets: tuple[int, ...]


def raise_for_error(code: int, *, topic: str | None = None, partition: int | None = None,
                    offset: int | None = None) -> None:
    """Raise the typed `BrokerError` for a non-zero response error code (0 returns)."""
    if code != 0:
        raise BrokerError.for_code(code, topic=topic, partition=partition, offset=offset)


# --------------------------------------------------------------------------------------------
# encoding (broker side)
# --------------------------------------------------------------------------------------------


def _size_error(size: int, error: int) -> bytes:
    try:
        return _SIZE_ERROR.pack(size, error)
    except struct.error as exc:
        raise LocalProtocolError(f"size {size} or error {error} out of range") from exc


def fetch_response_header(error: int, n: int) -> bytes:
    """The 6 bytes before an n-byte message set in a fetch response: size=2+n, error."""
    return _size_error(2 + n, error)


def encode_fetch_response(error: int, messages: bytes) -> bytes:
    """A whole fetch response frame."""
    return fetch_response_header(error, len(messages)) + bytes(messages)


def multifetch_response_header(total_body: int) -> bytes:
    """The first 6 bytes of a multifetch response: int32 size=total_body, int16 error=0.

    ``total_body`` is the length of the response *body* (everything after the int32 size),
    i.e. ``2 + sum(6 + n_i)`` for parts of n_i message bytes.
    """
    return _size_error(total_body, 0)


def multifetch_part_header(error: int, n: int) -> bytes:
    """The 6 bytes before the i-th message set of a multifetch response (same as a fetch)."""
    return _size_error(2 + n, error)


def encode_multifetch_response(responses: Sequence[FetchResponse]) -> bytes:
    """A whole multifetch response frame; parts in the order given (= request order)."""
    parts = [b""]
    for resp in responses:
        parts.append(multifetch_part_header(resp.error, len(resp.messages)))
        parts.append(bytes(resp.messages))
    body_parts = sum(len(p) for p in parts)
    parts[0] = multifetch_response_header(2 + body_parts)
    return b"".join(parts)


def encode_offsets_response(offsets: Sequence[int], error: int = 0) -> bytes:
    """A whole offsets response frame (give offsets in the order to send: descending)."""
    n = len(offsets)
    try:
        body = _ERROR_COUNT.pack(error, n) + struct.pack(f">{n}q", *offsets)
    except struct.error as exc:
        raise LocalProtocolError(f"offsets response field out of range: {exc}") from exc
    return _INT32.pack(len(body)) + body


# --------------------------------------------------------------------------------------------
# decoding (client side)
# --------------------------------------------------------------------------------------------


def _as_bytes(body: bytes | bytearray | memoryview) -> bytes:
    return body if type(body) is bytes else bytes(body)


def decode_fetch_response(body: bytes | bytearray | memoryview) -> FetchResponse:
    """Decode a fetch response body (the frame without its int32 size)."""
    data = _as_bytes(body)
    if len(data) < 2:
        raise TruncatedError("fetch response shorter than its error code", 0)
    (error,) = _ERROR.unpack_from(data, 0)
    return FetchResponse(error, data[2:])


def decode_multifetch_response(body: bytes | bytearray | memoryview) -> MultiFetchResponse:
    """Split a multifetch response body into its per-fetch responses."""
    data = _as_bytes(body)
    size = len(data)
    if size < 2:
        raise TruncatedError("multifetch response shorter than its error code", 0)
    (error,) = _ERROR.unpack_from(data, 0)
    parts: list[FetchResponse] = []
    pos = 2
    while pos < size:
        if pos + 6 > size:
            raise TruncatedError("multifetch response ends inside a part header", pos)
        n, part_error = _SIZE_ERROR.unpack_from(data, pos)
        if n < 2:
            raise DecodeError(f"multifetch part size {n} is smaller than its error code", pos)
        end = pos + 4 + n
        if end > size:
            raise TruncatedError(f"multifetch part of {n} bytes is truncated", pos)
        parts.append(FetchResponse(part_error, data[pos + 6:end]))
        pos = end
    return MultiFetchResponse(error, tuple(parts))


def decode_offsets_response(body: bytes | bytearray | memoryview) -> OffsetsResponse:
    """Decode an offsets response body.

    A body of only an error code (no count) is accepted when the error is non-zero, since
    nothing else can follow an error; the 0.7.2 broker itself never sends one.
    """
    data = _as_bytes(body)
    size = len(data)
    if size < 2:
        raise TruncatedError("offsets response shorter than its error code", 0)
    if size == 2:
        (error,) = _ERROR.unpack_from(data, 0)
        if error != 0:
            return OffsetsResponse(error, ())
    if size < 6:
        raise TruncatedError("offsets response ends inside its count", 2)
    error, count = _ERROR_COUNT.unpack_from(data, 0)
    if count < 0:
        raise DecodeError(f"negative offsets count {count}", 2)
    if size != 6 + 8 * count:
        if size < 6 + 8 * count:
            raise TruncatedError(f"offsets response announces {count} offsets but is "
                                 f"{size} bytes", 6)
        raise DecodeError(f"{size - 6 - 8 * count} trailing bytes after the offsets",
                          6 + 8 * count)
    return OffsetsResponse(error, struct.unpack_from(f">{count}q", data, 6))
