"""gzip (GZIPOutputStream-like) and xerial snappy: exact framing, interop, bounds, garbage."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import pytest
import snappy
from kafka import codec as kafka_codec  # kafka-python: an independent xerial implementation

from zkconsumer.errors import CompressionError, DecompressionLimitError, LocalProtocolError
from zkconsumer.protocol import Compression, compress, decompress
from zkconsumer.protocol.compression import XERIAL_BLOCK_SIZE

SAMPLES = [b"", b"x", b"hello world " * 100, os.urandom(70_000),
           bytes(range(256)) * 300]


def test_gzip_header_is_javas() -> None:
    out = compress(Compression.GZIP, b"abc")
    assert out[:10] == bytes([
        0x1F, 0x8B,  # gzip magic
        0x08,  # CM: deflate
        0x00,  # FLG: no name, no comment, no extra
        0x00, 0x00, 0x00, 0x00,  # MTIME 0
        0x00,  # XFL
        0x00,  # OS byte: GZIPOutputStream writes 0
    ])
    crc, isize = struct.unpack("<II", out[-8:])  # trailer: CRC32 and size, little-endian
    assert crc == zlib.crc32(b"abc")
    assert isize == 3


def test_gzip_body_is_level6_raw_deflate() -> None:
    data = b"the quick brown fox " * 50
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
    assert compress(Compression.GZIP, data)[10:-8] == deflater.compress(data) + deflater.flush()


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: str(len(d)))
def test_gzip_round_trip_and_stdlib_interop(data: bytes) -> None:
    out = compress(Compression.GZIP, data)
    assert gzip.decompress(out) == data
    assert decompress(Compression.GZIP, out) == data
    assert decompress(Compression.GZIP, gzip.compress(data, mtime=0)) == data


def test_gzip_concatenated_members() -> None:
    data = gzip.compress(b"first ") + compress(Compression.GZIP, b"second")
    assert decompress(Compression.GZIP, data) == b"first second"


def test_gzip_trailing_non_gzip_bytes_are_ignored() -> None:
    """java.util.zip.GZIPInputStream ignores bytes after a member that are not a header."""
    assert decompress(Compression.GZIP, compress(Compression.GZIP, b"v") + b"junk") == b"v"


@pytest.mark.parametrize("bad", [b"", b"\x1f", b"\x1f\x8b\x08", b"not gzip at all",
                                 b"\x78\x9c" + zlib.compress(b"zlib, not gzip")[2:]])
def test_gzip_garbage(bad: bytes) -> None:
    with pytest.raises(CompressionError):
        decompress(Compression.GZIP, bad)


def test_gzip_truncated_and_corrupt_trailer() -> None:
    out = compress(Compression.GZIP, b"payload" * 20)
    with pytest.raises(CompressionError):
        decompress(Compression.GZIP, out[:-3])
    with pytest.raises(CompressionError):
        decompress(Compression.GZIP, out[:-8] + b"\x00" * 8)  # CRC and size are checked


def test_gzip_bomb_stops_at_the_cap() -> None:
    bomb = compress(Compression.GZIP, b"\x00" * 10_000_000)
    assert len(bomb) < 20_000
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.GZIP, bomb, max_size=1_000_000)
    assert len(decompress(Compression.GZIP, bomb, max_size=10_000_000)) == 10_000_000
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.GZIP, bomb, max_size=9_999_999)


def test_gzip_cap_counts_all_members() -> None:
    member = compress(Compression.GZIP, b"a" * 600)
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.GZIP, member + member, max_size=1000)


# --- snappy ----------------------------------------------------------------------------------


def test_xerial_header_bytes_exactly() -> None:
    out = compress(Compression.SNAPPY, b"")
    assert out == bytes([
        0x82, 0x53, 0x4E, 0x41, 0x50, 0x50, 0x59, 0x00,  # magic: -126 'S' 'N' 'A' 'P' 'P' 'Y' 0
        0x00, 0x00, 0x00, 0x01,  # int32 BE version = 1
        0x00, 0x00, 0x00, 0x01,  # int32 BE min compatible version = 1
    ])


def test_xerial_blocks_of_32k() -> None:
    data = os.urandom(XERIAL_BLOCK_SIZE * 2 + 100)
    out = compress(Compression.SNAPPY, data)
    pos = 16
    blocks = []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)  # int32 BE compressed block length
        blocks.append(snappy.uncompress(out[pos + 4:pos + 4 + n]))
        pos += 4 + n
    assert pos == len(out)
    assert [len(b) for b in blocks] == [32768, 32768, 100]
    assert b"".join(blocks) == data


@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: str(len(d)))
def test_snappy_round_trip_and_kafka_python_interop(data: bytes) -> None:
    out = compress(Compression.SNAPPY, data)
    assert decompress(Compression.SNAPPY, out) == data
    if data:  # kafka-python does not recognise a header-only xerial stream
        assert kafka_codec.snappy_decode(out) == data
    theirs = kafka_codec.snappy_encode(data, xerial_compatible=True)
    assert decompress(Compression.SNAPPY, theirs) == data


def test_raw_snappy_block_is_accepted() -> None:
    data = b"raw snappy from a non-JVM producer " * 10
    assert decompress(Compression.SNAPPY, snappy.compress(data)) == data


@pytest.mark.parametrize("bad", [
    b"",  # raw block with no length preamble
    b"\xff\xff\xff\xff\xff\xff",  # unterminated varint
    b"\x0agarbage!!",  # declares 10 bytes, garbage body
    b"\x82SNAPPY\x00\x00\x00\x00\x01",  # truncated xerial header
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00",  # truncated block length
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09abc",  # truncated block
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff",  # negative length
    b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x03\x05ab",  # bad block
])
def test_snappy_garbage(bad: bytes) -> None:
    with pytest.raises(CompressionError):
        decompress(Compression.SNAPPY, bad)


def test_snappy_bomb_refused_before_inflating() -> None:
    data = b"\x00" * 1_000_000
    framed = compress(Compression.SNAPPY, data)
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.SNAPPY, framed, max_size=500_000)
    assert decompress(Compression.SNAPPY, framed, max_size=1_000_000) == data
    # A raw block that merely *claims* 2 GiB is refused from its preamble alone.
    liar = bytes([0x80, 0x80, 0x80, 0x80, 0x08]) + b"\x00" * 10
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.SNAPPY, liar)


def test_none_codec_and_unknown_codec() -> None:
    assert compress(Compression.NONE, b"abc") == b"abc"
    assert decompress(Compression.NONE, memoryview(b"abc")) == b"abc"
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.NONE, b"abcd", max_size=3)
    with pytest.raises(CompressionError):
        compress(3, b"x")
    with pytest.raises(CompressionError):
        decompress(3, b"x")


def test_decompress_accepts_bytearray_and_memoryview() -> None:
    out = compress(Compression.GZIP, b"data")
    assert decompress(Compression.GZIP, bytearray(out)) == b"data"
    assert decompress(Compression.GZIP, memoryview(out)) == b"data"
    sn = compress(Compression.SNAPPY, b"data")
    assert decompress(Compression.SNAPPY, memoryview(sn)) == b"data"


@pytest.mark.parametrize("cap", [-1, 2**63])
def test_invalid_caps_are_refused(cap: int) -> None:
    """A negative cap must not turn into zlib's max_length=0, which means "unlimited"."""
    with pytest.raises(LocalProtocolError):
        decompress(Compression.GZIP, compress(Compression.GZIP, b"x"), max_size=cap)


def test_zero_cap() -> None:
    assert decompress(Compression.GZIP, compress(Compression.GZIP, b""), max_size=0) == b""
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.GZIP, compress(Compression.GZIP, b"x"), max_size=0)
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.SNAPPY, compress(Compression.SNAPPY, b"x"), max_size=0)
