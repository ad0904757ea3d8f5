"""One Kafka 0.7 message on the wire: layout, CRC, encoding, and the checked shallow read.

Wire layout of one message-set entry (message/Message.scala, MessageSet.scala)::

    int32  N            length of what follows (header + payload)
    magic 0:  int8 magic=0 | uint32 crc | payload (N-5 bytes)
    magic 1:  int8 magic=1 | int8 attributes | uint32 crc | payload (N-6 bytes)
              attributes & 0x03 = codec (0 none, 1 gzip, 2 snappy; 3 is invalid)

Invariants
    * The CRC is IEEE CRC32 of the payload only (magic and attributes are not covered), stored
      unsigned big-endian.  ``isal``'s crc32 is used when available (2-6x faster than zlib's).
    * `read_shallow` never returns a message whose CRC does not match, and never reads past
      ``size``: a message that does not fit is reported as ``None`` (a partial tail), while a
      structurally impossible one raises (negative or too-small length, unknown magic).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence

from zkconsumer.errors import (
    CompressionError,
    CorruptMessageError,
    InvalidMessageSizeError,
    LocalProtocolError,
    UnknownMagicError,
)
from zkconsumer.protocol.compression import compress
from zkconsumer.protocol.constants import CODEC_MASK, Compression

try:  # pragma: no branch - depends on the environment
    from isal.isal_zlib import crc32 as _isal_crc32

    crc32: Callable[[bytes], int] = _isal_crc32
except ImportError:  # pragma: no cover - isal is a declared dependency
    crc32 = zlib.crc32

__all__ = [
    "HEADER_V0",
    "HEADER_V1",
    "MAX_PAYLOAD",
    "codec_of",
    "crc32",
    "encode_message",
    "encode_message_set",
    "read_shallow",
]

HEADER_V1 = struct.Struct(">iBBI")  # length, magic=1, attributes, crc  (10 bytes)
HEADER_V0 = struct.Struct(">iBI")  # length, magic=0, crc  (9 bytes)
_LENGTH = struct.Struct(">i")  # length
_MAGIC_ATTR_CRC = struct.Struct(">BBI")  # magic, attributes, crc (after the length)
_MAGIC_CRC = struct.Struct(">BI")  # magic, crc (after the length)
#: Largest payload an int32 length can frame (with a magic-1 header).
MAX_PAYLOAD = 0x7FFFFFFF - 6


def encode_message(payload: bytes, *, compression: Compression | int = Compression.NONE,
                   magic: int = 1) -> bytes:
    """One message-set entry (int32 length prefix included).

    ``compression`` only sets the attribute bits: a wrapper's payload must already be
    compressed (see `encode_message_set`).  Magic 0 has no attributes, so it ignores it.
    """
    if len(payload) > MAX_PAYLOAD:
        raise LocalProtocolError(f"payload of {len(payload)} bytes cannot be framed")
    if magic == 1:
        if compression not in (0, 1, 2):
            raise LocalProtocolError(f"unknown compression codec {compression!r}")
        return HEADER_V1.pack(len(payload) + 6, 1, int(compression), crc32(payload)) + payload
    if magic == 0:
        return HEADER_V0.pack(len(payload) + 5, 0, crc32(payload)) + payload
    raise LocalProtocolError(f"cannot encode magic {magic!r}: Kafka 0.7 knows only 0 and 1")


def encode_message_set(payloads: Sequence[bytes], *,
                       compression: Compression | int = Compression.NONE,
                       magic: int = 1) -> bytes:
    """A message set: plain entries, or ONE compressed wrapper holding them.

    With gzip/snappy the payloads are encoded as an uncompressed set (magic ``magic``, which
    the Scala producer always makes 1 with attributes 0), compressed, and wrapped in one
    magic-1 message whose attributes name the codec -- what the 0.7 producer sends per
    (topic, partition).  An empty list with a codec gives a wrapper around an empty set,
    which 0.7 accepts and stores.
    """
    if magic not in (0, 1):
        raise LocalProtocolError(f"cannot encode magic {magic!r}: Kafka 0.7 knows only 0 and 1")
    if compression not in (0, 1, 2):
        raise LocalProtocolError(f"unknown compression codec {compression!r}")
    parts: list[bytes] = []
    append = parts.append
    c32 = crc32
    if magic == 1:
        pack = HEADER_V1.pack
        for payload in payloads:
            if len(payload) > MAX_PAYLOAD:
                raise LocalProtocolError(f"payload of {len(payload)} bytes cannot be framed")
            append(pack(len(payload) + 6, 1, 0, c32(payload)))
            append(payload)
    else:
        pack0 = HEADER_V0.pack
        for payload in payloads:
            if len(payload) > MAX_PAYLOAD:
                raise LocalProtocolError(f"payload of {len(payload)} bytes cannot be framed")
            append(pack0(len(payload) + 5, 0, c32(payload)))
            append(payload)
    plain = b"".join(parts)
    if compression == Compression.NONE:
        return plain
    return encode_message(compress(compression, plain), compression=compression, magic=1)


def read_shallow(buf: bytes, pos: int, size: int,
                 base_offset: int) -> tuple[int, int, int, bytes] | None:
    """Read and CRC-check the entry at ``pos``: ``(end, magic, attributes, payload)``.

    Returns None when the entry does not fit in ``buf[:size]`` (a partial tail).  Raises
    `InvalidMessageSizeError` for a negative or too-short length, `UnknownMagicError`,
    `CorruptMessageError`; error offsets are ``base_offset + pos``.
    """
    if pos + 4 > size:
        return None
    (n,) = _LENGTH.unpack_from(buf, pos)
    if n < 5:
        raise InvalidMessageSizeError(f"invalid message length {n}", base_offset + pos)
    end = pos + 4 + n
    if end > size:
        return None
    magic = buf[pos + 4]
    if magic == 1:
        if n < 6:
            raise InvalidMessageSizeError(
                f"invalid message length {n} for magic 1", base_offset + pos)
        _, attributes, crc = _MAGIC_ATTR_CRC.unpack_from(buf, pos + 4)
        payload = buf[pos + 10:end]
    elif magic == 0:
        attributes = 0
        _, crc = _MAGIC_CRC.unpack_from(buf, pos + 4)
        payload = buf[pos + 9:end]
    else:
        raise UnknownMagicError(f"unknown magic byte {magic}", base_offset + pos)
    if crc32(payload) != crc:
        raise CorruptMessageError(
            f"CRC mismatch: stored {crc:#010x}, computed {crc32(payload):#010x}",
            base_offset + pos)
    return end, magic, attributes, payload


def codec_of(attributes: int, offset: int) -> Compression:
    """The codec named by an attributes byte; the invalid value 3 raises CompressionError."""
    codec = attributes & CODEC_MASK
    if codec == 3:
        raise CompressionError("unknown compression codec 3", offset)
    return Compression(codec)
