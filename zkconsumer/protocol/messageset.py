"""Decoding Kafka 0.7 message sets: deep (wrappers expanded), shallow, and validation.

A message set is a run of entries ``int32 N + N bytes`` (see `message`).  It usually comes
from a fetch response or a segment file, so it may end inside its last entry: that partial
tail is *not* an error, it is reported through ``valid_bytes`` (the byte count of whole shallow
messages) and decoding simply stops there.  Anything else malformed is corruption and raises a
`DecodeError` subclass whose ``offset`` is ``base_offset`` + the entry's position.

Offsets (REFERENCE §4.5, ByteBufferMessageSet.internalIterator)
    Every decoded message is ``(offset, next_offset, payload)``.  ``offset`` is the position of
    the *shallow* entry holding the payload.  For a plain entry ``next_offset`` is its end.  For
    the messages inside a compressed wrapper, all but the last get ``next_offset`` = the
    wrapper's START and the last gets the wrapper's END -- so a consumer that commits in the
    middle of a compressed set replays the whole set, exactly like the Scala consumer.

Inside a wrapper the decompressed set must be whole: a partial inner entry is corruption.
Nested wrappers are expanded (Scala recurses too; nobody produces them); their combined
inflated size is capped by ``max_inflated`` per shallow wrapper.

Performance: `decode_message_set` is the consumer's hot path.  It runs the compiled walk of
``_speedups.c`` when that optional extension is built (see `accel`; ``ZKCONSUMER_PURE=1``
forces the pure path), else `decode_message_set_pure`, the reference: there the common entry --
magic 1, attributes 0 -- is decoded inline with one ``struct`` call and one CRC per message;
everything else goes through the checked general path.  Both give identical results and errors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from zkconsumer.errors import CompressionError, DecodeError, InvalidMessageSizeError
from zkconsumer.protocol import accel
from zkconsumer.protocol.compression import decompress
from zkconsumer.protocol.constants import DEFAULT_MAX_INFLATED, Compression
from zkconsumer.protocol.message import HEADER_V1, codec_of, crc32, read_shallow

__all__ = [
    "DecodedSet",
    "SetInfo",
    "ShallowMessage",
    "active_decoder",
    "decode_message_set",
    "decode_message_set_pure",
    "iter_shallow",
    "validate_message_set",
]

#: Compressed wrappers nested deeper than this are refused (nobody nests; bombs do).
MAX_NESTING = 4

Buffer = bytes | bytearray | memoryview


class DecodedSet(NamedTuple):
    """Result of `decode_message_set`."""

    #: ``(offset, next_offset, payload)`` for every message, wrappers expanded.
    messages: list[tuple[int, int, bytes]]
    #: Bytes of whole shallow messages from the start of the buffer.
    valid_bytes: int
    #: ``len(buffer)``.
    size: int

    @property
    def incomplete(self) -> bool:
        """The buffer ends inside a message (normal for fetch responses)."""
        return self.valid_bytes < self.size

    @property
    def too_large(self) -> bool:
        """Non-empty but not one whole message: the first message exceeds the fetch size."""
        return self.size > 0 and self.valid_bytes == 0


class ShallowMessage(NamedTuple):
    """One top-level entry, CRC-checked; a wrapper's payload is still compressed."""

    offset: int
    next_offset: int
    magic: int
    compression: Compression
    payload: bytes


class SetInfo(NamedTuple):
    """Result of `validate_message_set`."""

    valid_bytes: int
    shallow_count: int
    deep_count: int
    max_shallow_payload: int


def _as_bytes(buf: Buffer) -> bytes:
    return buf if type(buf) is bytes else bytes(buf)


def _inner_payloads(data: bytes, offset: int, budget: list[int], depth: int) -> list[bytes]:
    """Payloads of a decompressed inner set, nested wrappers expanded; must be whole.

    Same inline fast path as `decode_message_set` (inner messages of a Scala producer are
    always magic 1, attributes 0); errors are re-anchored at the wrapper's ``offset``.
    """
    if depth > MAX_NESTING:
        raise CompressionError("compressed messages nested too deeply", offset)
    out: list[bytes] = []
    append = out.append
    unpack = HEADER_V1.unpack_from
    c32 = crc32
    size = len(data)
    fast_end = size - 10
    pos = 0
    while pos < size:
        if pos <= fast_end:
            n, magic, attributes, crc = unpack(data, pos)
            end = pos + 4 + n
            if magic == 1 and attributes == 0 and pos + 10 <= end <= size:
                payload = data[pos + 10:end]
                if c32(payload) == crc:
                    append(payload)
                    pos = end
                    continue
        try:
            entry = read_shallow(data, pos, size, 0)
        except DecodeError as exc:
            detail = str(exc).replace("(at byte offset", "(at inner byte offset")
            raise type(exc)(f"inside the compressed message: {detail}", offset) from exc
        if entry is None:
            raise InvalidMessageSizeError(
                "compressed message set ends inside a message", offset)
        end, magic, attributes, payload = entry
        codec = codec_of(attributes, offset) if magic == 1 else Compression.NONE
        if codec == Compression.NONE:
            append(payload)
        else:
            try:
                inflated = decompress(codec, payload, max_size=budget[0])
            except DecodeError as exc:
                raise type(exc)(str(exc), offset) from exc
            budget[0] -= len(inflated)
            out.extend(_inner_payloads(inflated, offset, budget, depth + 1))
        pos = end
    return out


def _expand(payload: bytes, codec: Compression, offset: int, max_inflated: int) -> list[bytes]:
    """Decompress one shallow wrapper and return its (deep) payloads."""
    try:
        inflated = decompress(codec, payload, max_size=max_inflated)
    except DecodeError as exc:
        raise type(exc)(str(exc), offset) from exc
    return _inner_payloads(inflated, offset, [max_inflated - len(inflated)], 1)


#: The compiled walk, or None for the pure path (tests switch it to run both).
_speedups = accel.speedups
#: The compiled walk computes offsets in int64: bigger arguments take the pure path.
_C_LIMIT = 1 << 62


def active_decoder() -> str:
    """``"compiled"`` or ``"pure"``: what `decode_message_set` runs right now."""
    return "compiled" if _speedups is not None else "pure"


def _inflate_at(codec: int, payload: bytes, max_size: int, offset: int) -> bytes:
    """Decompress one wrapper payload for the compiled walk, errors re-anchored at offset."""
    try:
        return decompress(codec, payload, max_size=max_size)
    except DecodeError as exc:
        raise type(exc)(str(exc), offset) from exc


def decode_message_set(buf: Buffer, base_offset: int = 0, *,
                       max_inflated: int = DEFAULT_MAX_INFLATED,
                       deep: bool = True) -> DecodedSet:
    """Decode every whole message of ``buf`` (see the module docstring for offsets).

    ``deep=False`` returns wrappers as they are (payload = compressed bytes, next = end).
    Runs the compiled walk when it is available, else `decode_message_set_pure`.
    """
    ext = _speedups
    if ext is None or not (-_C_LIMIT < base_offset < _C_LIMIT
                           and -_C_LIMIT < max_inflated < _C_LIMIT):
        return decode_message_set_pure(buf, base_offset, max_inflated=max_inflated, deep=deep)
    data = buf if type(buf) is bytes else bytes(buf)
    messages, valid = ext.decode(data, base_offset, max_inflated, deep, _inflate_at)
    return DecodedSet(messages, valid, len(data))


def decode_message_set_pure(buf: Buffer, base_offset: int = 0, *,
                            max_inflated: int = DEFAULT_MAX_INFLATED,
                            deep: bool = True) -> DecodedSet:
    """`decode_message_set` in pure Python: the reference and the fallback."""
    data = buf if type(buf) is bytes else bytes(buf)
    size = len(data)
    messages: list[tuple[int, int, bytes]] = []
    append = messages.append
    unpack = HEADER_V1.unpack_from
    c32 = crc32
    fast_end = size - 10
    pos = 0
    while pos < size:
        if pos <= fast_end:
            n, magic, attributes, crc = unpack(data, pos)
            end = pos + 4 + n
            if magic == 1 and attributes == 0 and pos + 10 <= end <= size:
                payload = data[pos + 10:end]
                if c32(payload) == crc:
                    append((base_offset + pos, base_offset + end, payload))
                    pos = end
                    continue
        # General path: magic 0, wrappers, partial tails, corruption (raises with offsets).
        entry = read_shallow(data, pos, size, base_offset)
        if entry is None:
            break
        end, magic, attributes, payload = entry
        start = base_offset + pos
        stop = base_offset + end
        codec = codec_of(attributes, start) if magic == 1 else Compression.NONE
        if codec == Compression.NONE or not deep:
            append((start, stop, payload))
        else:
            inner = _expand(payload, codec, start, max_inflated)
            if inner:
                for value in inner[:-1]:
                    append((start, start, value))
                append((start, stop, inner[-1]))
        pos = end
    return DecodedSet(messages, pos, size)


def iter_shallow(buf: Buffer, base_offset: int = 0) -> Iterator[ShallowMessage]:
    """Yield the top-level entries, CRC-checked, stopping silently at a partial tail."""
    data = _as_bytes(buf)
    size = len(data)
    pos = 0
    while True:
        entry = read_shallow(data, pos, size, base_offset)
        if entry is None:
            return
        end, magic, attributes, payload = entry
        codec = codec_of(attributes, base_offset + pos) if magic == 1 else Compression.NONE
        yield ShallowMessage(base_offset + pos, base_offset + end, magic, codec, payload)
        pos = end


def validate_message_set(buf: Buffer, *,
                         max_inflated: int = DEFAULT_MAX_INFLATED) -> SetInfo:
    """Deep-validate a set as the 0.7 broker does on produce; raise on any corruption.

    Every CRC is checked, inner sets included, so a produce the broker would reject (and
    answer by closing the socket) is recognised before it is appended.  A trailing partial
    message is not an error here either (0.7.2 truncates the set to ``valid_bytes``), but a
    non-empty set with ``valid_bytes == 0`` is one the 0.7.2 broker rejects
    (InvalidMessageSizeException for a truncated first message): that decision is the
    caller's.  Runs the compiled walk when it is available (same results and errors).
    """
    data = _as_bytes(buf)
    ext = _speedups
    if ext is not None and -_C_LIMIT < max_inflated < _C_LIMIT:
        return SetInfo(*ext.validate(data, max_inflated, _inflate_at))
    size = len(data)
    unpack = HEADER_V1.unpack_from
    c32 = crc32
    fast_end = size - 10
    pos = shallow = deep_count = largest = 0
    while pos < size:
        # Fast path (what Scala producers send): magic 1, no compression, CRC good.  This is
        # the broker's per-message produce cost, so it is inlined like decode_message_set's.
        if pos <= fast_end:
            n, magic, attributes, crc = unpack(data, pos)
            end = pos + 4 + n
            if magic == 1 and attributes == 0 and pos + 10 <= end <= size \
                    and c32(data[pos + 10:end]) == crc:
                shallow += 1
                deep_count += 1
                if n - 6 > largest:
                    largest = n - 6
                pos = end
                continue
        entry = read_shallow(data, pos, size, 0)
        if entry is None:
            break
        end, magic, attributes, payload = entry
        codec = codec_of(attributes, pos) if magic == 1 else Compression.NONE
        shallow += 1
        largest = max(largest, len(payload))
        if codec == Compression.NONE:
            deep_count += 1
        else:
            deep_count += len(_expand(payload, codec, pos, max_inflated))
        pos = end
    valid = pos
    return SetInfo(valid, shallow, deep_count, largest)
