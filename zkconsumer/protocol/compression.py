"""gzip and snappy exactly as the Kafka 0.7.2 JVM producer writes them, with bounded inflation.

Job: `compress` / `decompress` the payload of a wrapper message (message/CompressionUtils.scala).

gzip
    Output looks like ``java.util.zip.GZIPOutputStream`` with default settings: the fixed
    10-byte header ``1f 8b 08 00 00000000 00 00`` (deflate, no flags, mtime 0, no extra flags,
    OS byte 0), raw deflate at level 6 (Java's ``Deflater.DEFAULT_COMPRESSION``), then the
    little-endian CRC32 and ISIZE trailer.  The deflate *stream* is zlib's, so bytes may differ
    from a JVM's but decode identically everywhere.  Decoding accepts concatenated members (as
    ``GZIPInputStream`` does) and, like it, ignores trailing bytes that are not a gzip header.

snappy
    xerial framing as snappy-java 1.0.4.1 ``SnappyOutputStream`` writes it: the 8-byte magic
    ``82 'SNAPPY' 00``, int32 BE version 1, int32 BE min-compatible version 1, then for each
    32 KiB of input one block ``int32 BE compressed length`` + raw snappy block.  The header is
    written even for empty input (the stream writes it on construction).  Decoding accepts that
    framing and also a bare raw snappy block (what some non-JVM producers sent).

Invariants
    * Decompression never produces more than ``max_size`` bytes: gzip is inflated with a bounded
      ``max_length``; each snappy block's varint length preamble is read *before* inflating, so
      a bomb is refused without allocating it.  Exceeding the cap raises
      `DecompressionLimitError`.
    * Malformed input raises `CompressionError` (never ``zlib.error`` or a snappy exception).
    * Inflating uses ``isal`` (same API as zlib, ~1.7x faster) when installed; deflating always
      uses zlib level 6, which makes our gzip bytes identical to the JVM's.
"""

from __future__ import annotations

import struct
import sys
import types
import zlib

import snappy

from zkconsumer.errors import CompressionError, DecompressionLimitError, LocalProtocolError
from zkconsumer.protocol.constants import DEFAULT_MAX_INFLATED, Compression

_inflate: types.ModuleType
try:  # isal's inflate is ~1.7x faster than zlib's and has the same bounded API
    from isal import isal_zlib

    _inflate = isal_zlib
except ImportError:  # pragma: no cover - isal is a declared dependency
    _inflate = zlib
_INFLATE_ERRORS: tuple[type[Exception], ...] = (zlib.error, _inflate.error)

__all__ = [
    "GZIP_HEADER",
    "XERIAL_BLOCK_SIZE",
    "XERIAL_HEADER",
    "compress",
    "decompress",
    "gzip_compress",
    "gzip_decompress",
    "snappy_compress",
    "snappy_decompress",
]

#: What GZIPOutputStream writes first: magic, CM=8 (deflate), FLG=0, MTIME=0, XFL=0, OS=0.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
_GZIP_TRAILER = struct.Struct("<II")  # crc32 of the uncompressed data, size mod 2**32

#: xerial SnappyCodec header: magic (8 bytes), int32 version=1, int32 min compatible=1.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
#: SnappyOutputStream's default block size: input is cut into blocks of this many bytes.
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")
#: Largest cap accepted (zlib's max_length is a C ssize_t; 0 would mean "unlimited" to it).
_MAX_SIZE = sys.maxsize - 1


# --------------------------------------------------------------------------------------------
# gzip
# --------------------------------------------------------------------------------------------


def gzip_compress(data: bytes) -> bytes:
    """gzip ``data`` the way Java's ``GZIPOutputStream`` frames it (see module docstring)."""
    deflater = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    trailer = _GZIP_TRAILER.pack(zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)
    return b"".join((GZIP_HEADER, body, trailer))


def gzip_decompress(data: bytes, max_size: int = DEFAULT_MAX_INFLATED) -> bytes:
    """Inflate one or more concatenated gzip members, refusing to produce more than max_size."""
    parts: list[bytes] = []
    produced = 0
    remaining = data
    first = True
    while first or remaining[:2] == b"\x1f\x8b":
        first = False
        inflater = _inflate.decompressobj(31)  # gzip container only, like GZIPInputStream
        try:
            out = inflater.decompress(remaining, max_size - produced + 1)
        except _INFLATE_ERRORS as exc:
            raise CompressionError(f"invalid gzip data: {exc}") from exc
        produced += len(out)
        if produced > max_size:
            raise DecompressionLimitError(
                f"gzip data inflates beyond the cap of {max_size} bytes")
        parts.append(out)
        if not inflater.eof:
            raise CompressionError("truncated gzip data")
        remaining = inflater.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------------------------
# snappy (xerial framing)
# --------------------------------------------------------------------------------------------


def snappy_compress(data: bytes) -> bytes:
    """snappy with xerial framing, block by block, exactly as SnappyOutputStream 1.0.4.1."""
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = snappy.compress(bytes(view[start:start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_length(block: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy block declares (its little-endian varint)."""
    result = 0
    shift = 0
    for i in range(min(len(block), 5)):
        byte = block[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
    raise CompressionError("invalid snappy block: bad length preamble")


def _raw_uncompress(block: bytes, budget: int) -> bytes:
    declared = _raw_length(block)
    if declared > budget:
        raise DecompressionLimitError(
            f"snappy block declares {declared} bytes, beyond the remaining cap of {budget}")
    try:
        out = snappy.uncompress(block)
    except Exception as exc:  # snappy/cramjam raise assorted types; all mean "corrupt"
        raise CompressionError(f"invalid snappy block: {exc}") from exc
    if not isinstance(out, bytes):  # cramjam may hand back a Buffer
        out = bytes(out)
    return out


def snappy_decompress(data: bytes, max_size: int = DEFAULT_MAX_INFLATED) -> bytes:
    """Decode xerial-framed snappy (or a bare raw snappy block), at most max_size bytes."""
    if not data.startswith(XERIAL_MAGIC):
        return _raw_uncompress(data, max_size)
    if len(data) < len(XERIAL_HEADER):
        raise CompressionError("truncated xerial snappy header")
    parts: list[bytes] = []
    produced = 0
    pos = len(XERIAL_HEADER)
    size = len(data)
    while pos < size:
        if pos + 4 > size:
            raise CompressionError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > size:
            raise CompressionError(f"xerial snappy block of {length} bytes is truncated")
        out = _raw_uncompress(data[pos:pos + length], max_size - produced)
        produced += len(out)
        parts.append(out)
        pos += length
    return parts[0] if len(parts) == 1 else b"".join(parts)


# --------------------------------------------------------------------------------------------
# dispatch
# --------------------------------------------------------------------------------------------


def compress(codec: Compression | int, data: bytes) -> bytes:
    """Compress a wrapper payload with ``codec`` (NONE returns the data unchanged)."""
    if codec == Compression.GZIP:
        return gzip_compress(data)
    if codec == Compression.SNAPPY:
        return snappy_compress(data)
    if codec == Compression.NONE:
        return bytes(data)
    raise CompressionError(f"unknown compression codec {codec}")


def decompress(codec: Compression | int, data: bytes | bytearray | memoryview, *,
               max_size: int = DEFAULT_MAX_INFLATED) -> bytes:
    """Decompress a wrapper payload; raises CompressionError / DecompressionLimitError."""
    if not 0 <= max_size <= _MAX_SIZE:
        raise LocalProtocolError(f"max_size must be within 0..{_MAX_SIZE}, got {max_size}")
    raw = data if isinstance(data, bytes) else bytes(data)
    if codec == Compression.GZIP:
        return gzip_decompress(raw, max_size)
    if codec == Compression.SNAPPY:
        return snappy_decompress(raw, max_size)
    if codec == Compression.NONE:
        if len(raw) > max_size:
            raise DecompressionLimitError(f"{len(raw)} bytes exceed the cap of {max_size}")
        return raw
    raise CompressionError(f"unknown compression codec {codec}")
