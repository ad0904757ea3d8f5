"""Message-set decoding: offsets (incl. the reference wrapper semantics), partial tails,
corruption, shallow iteration and produce-side validation."""

from __future__ import annotations

import struct
import zlib

import pytest

from zkconsumer.errors import (
    CompressionError,
    CorruptMessageError,
    DecodeError,
    DecompressionLimitError,
    InvalidMessageSizeError,
    UnknownMagicError,
)
from zkconsumer.protocol import (
    Compression,
    SetInfo,
    ShallowMessage,
    compress,
    decode_message_set,
    encode_message,
    encode_message_set,
    iter_shallow,
    validate_message_set,
)

CODECS = [Compression.GZIP, Compression.SNAPPY]


def raw_message(payload: bytes, *, magic: int = 1, attributes: int = 0,
                crc: int | None = None) -> bytes:
    """An entry built by hand, so tests can make ones the encoder refuses to."""
    value = zlib.crc32(payload) & 0xFFFFFFFF if crc is None else crc
    if magic == 0:
        return struct.pack(">iBI", 5 + len(payload), 0, value) + payload
    return struct.pack(">iBBI", 6 + len(payload), magic, attributes, value) + payload


def test_plain_offsets_and_base_offset() -> None:
    data = encode_message_set([b"a", b"bb", b"ccc"])
    decoded = decode_message_set(data, 1000)
    assert decoded.messages == [
        (1000, 1011, b"a"),  # 4 + 6 + 1 = 11 bytes
        (1011, 1023, b"bb"),
        (1023, 1036, b"ccc"),
    ]
    assert decoded.valid_bytes == len(data) == decoded.size
    assert not decoded.incomplete
    assert not decoded.too_large


@pytest.mark.parametrize("codec", CODECS)
def test_wrapper_offsets_follow_the_reference(codec: Compression) -> None:
    """All inner messages but the last: next = wrapper START; the last: wrapper END."""
    first = encode_message(b"plain")
    wrapper = encode_message_set([b"x", b"y", b"z"], compression=codec)
    data = first + wrapper + encode_message(b"after")
    start, end = 500 + len(first), 500 + len(first) + len(wrapper)
    decoded = decode_message_set(data, 500)
    assert decoded.messages == [
        (500, start, b"plain"),
        (start, start, b"x"),
        (start, start, b"y"),
        (start, end, b"z"),
        (end, 500 + len(data), b"after"),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_single_message_wrapper(codec: Compression) -> None:
    wrapper = encode_message_set([b"only"], compression=codec)
    assert decode_message_set(wrapper).messages == [(0, len(wrapper), b"only")]


@pytest.mark.parametrize("codec", CODECS)
def test_wrapper_around_empty_set_counts_in_valid_bytes(codec: Compression) -> None:
    wrapper = encode_message_set([], compression=codec)
    data = wrapper + encode_message(b"next")
    decoded = decode_message_set(data)
    assert decoded.messages == [(len(wrapper), len(data), b"next")]
    assert decoded.valid_bytes == len(data)
    alone = decode_message_set(wrapper)
    assert alone.messages == []
    assert alone.valid_bytes == len(wrapper)
    assert not alone.too_large


def test_nested_wrappers_are_expanded() -> None:
    inner = encode_message_set([b"a", b"b"], compression=Compression.SNAPPY)
    middle = inner + encode_message(b"c")
    outer = encode_message(compress(Compression.GZIP, middle), compression=Compression.GZIP)
    decoded = decode_message_set(outer)
    assert decoded.messages == [(0, 0, b"a"), (0, 0, b"b"), (0, len(outer), b"c")]


def test_inner_magic0_messages() -> None:
    wrapper = encode_message_set([b"p", b"q"], compression=Compression.GZIP, magic=0)
    assert [m[2] for m in decode_message_set(wrapper).messages] == [b"p", b"q"]


def test_deep_false_returns_wrappers() -> None:
    wrapper = encode_message_set([b"x", b"y"], compression=Compression.GZIP)
    data = wrapper + encode_message(b"z")
    decoded = decode_message_set(data, deep=False)
    assert decoded.messages == [(0, len(wrapper), wrapper[10:]),
                                (len(wrapper), len(data), b"z")]


@pytest.mark.parametrize("cut", [1, 3, 4, 9, 10, 14])
def test_partial_tail_is_not_an_error(cut: int) -> None:
    whole = encode_message_set([b"a", b"b"])
    data = whole + encode_message(b"hello")[:cut]
    decoded = decode_message_set(data)
    assert [m[2] for m in decoded.messages] == [b"a", b"b"]
    assert decoded.valid_bytes == len(whole)
    assert decoded.incomplete
    assert not decoded.too_large


def test_first_message_too_large() -> None:
    decoded = decode_message_set(encode_message(b"x" * 100)[:50])
    assert decoded.messages == []
    assert decoded.valid_bytes == 0
    assert decoded.too_large
    assert decode_message_set(b"").too_large is False


def test_partial_magic0_tail_and_short_buffers() -> None:
    msg0 = raw_message(b"", magic=0)  # 9 bytes: shorter than a magic-1 header
    assert decode_message_set(msg0).messages == [(0, 9, b"")]
    assert decode_message_set(msg0[:8]).valid_bytes == 0


def test_accepts_bytearray_and_memoryview() -> None:
    data = encode_message_set([b"a", b"b"]) + encode_message_set([b"c"], compression=1)
    expected = decode_message_set(data)
    assert decode_message_set(bytearray(data)) == expected
    assert decode_message_set(memoryview(data)) == expected
    assert all(type(m[2]) is bytes for m in decode_message_set(memoryview(data)).messages)


# --- corruption ------------------------------------------------------------------------------


def test_bad_crc_raises_with_offset() -> None:
    good = encode_message(b"good")
    bad = raw_message(b"evil", crc=1234)
    with pytest.raises(CorruptMessageError) as info:
        decode_message_set(good + bad, 100)
    assert info.value.offset == 100 + len(good)


def test_bad_crc_magic0() -> None:
    with pytest.raises(CorruptMessageError):
        decode_message_set(raw_message(b"x", magic=0, crc=7))


@pytest.mark.parametrize("magic", [2, 3, 255])
def test_unknown_magic(magic: int) -> None:
    with pytest.raises(UnknownMagicError) as info:
        decode_message_set(encode_message(b"ok") + raw_message(b"x", magic=magic), 7)
    assert info.value.offset == 7 + 12


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 1, 4])
def test_negative_or_too_small_length(length: int) -> None:
    data = encode_message(b"ok") + struct.pack(">i", length) + b"\x01" * 12
    with pytest.raises(InvalidMessageSizeError) as info:
        decode_message_set(data)
    assert info.value.offset == 12


def test_negative_length_at_buffer_end() -> None:
    """Only the length is present but it is negative: corruption, not a partial tail."""
    with pytest.raises(InvalidMessageSizeError):
        decode_message_set(struct.pack(">i", -5))


def test_magic1_length_five_is_too_small() -> None:
    data = struct.pack(">ibI", 5, 1, 0)  # magic 1 needs at least 6 bytes of header
    with pytest.raises(InvalidMessageSizeError):
        decode_message_set(data)


def test_unknown_codec_three() -> None:
    with pytest.raises(CompressionError) as info:
        decode_message_set(raw_message(b"zz", attributes=3))
    assert info.value.offset == 0
    with pytest.raises(CompressionError):
        list(iter_shallow(raw_message(b"zz", attributes=3)))


def test_attribute_high_bits_are_ignored() -> None:
    assert decode_message_set(raw_message(b"v", attributes=0x04)).messages == [(0, 11, b"v")]


@pytest.mark.parametrize("codec", CODECS)
def test_bad_crc_inside_wrapper(codec: Compression) -> None:
    inner = encode_message(b"fine") + raw_message(b"broken", crc=99)
    wrapper = encode_message(compress(codec, inner), compression=codec)
    data = encode_message(b"first") + wrapper
    with pytest.raises(CorruptMessageError) as info:
        decode_message_set(data, 40)
    assert info.value.offset == 40 + 15  # the wrapper's position (after 15 bytes)


@pytest.mark.parametrize("codec", CODECS)
def test_partial_inner_message_is_corruption(codec: Compression) -> None:
    inner = encode_message(b"fine") + encode_message(b"cut")[:-1]
    wrapper = encode_message(compress(codec, inner), compression=codec)
    with pytest.raises(InvalidMessageSizeError):
        decode_message_set(wrapper)


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_wrapper_payload(codec: Compression) -> None:
    wrapper = encode_message(b"\x00\x01 definitely not compressed", compression=codec)
    with pytest.raises(CompressionError) as info:
        decode_message_set(encode_message(b"x") + wrapper, 3)
    assert info.value.offset == 3 + 11  # after the 11-byte b"x" entry


@pytest.mark.parametrize("codec", CODECS)
def test_wrapper_bomb_is_capped(codec: Compression) -> None:
    wrapper = encode_message_set([b"\x00" * 100_000], compression=codec)
    with pytest.raises(DecompressionLimitError):
        decode_message_set(wrapper, max_inflated=50_000)
    assert len(decode_message_set(wrapper, max_inflated=200_000).messages) == 1


def test_nested_bomb_shares_the_cap() -> None:
    inner = encode_message_set([b"\x00" * 30_000], compression=Compression.GZIP)
    outer = encode_message_set([b"pad"] * 10, compression=Compression.GZIP)
    nested = encode_message(compress(Compression.GZIP, inner * 3), compression=Compression.GZIP)
    assert len(decode_message_set(outer + nested, max_inflated=200_000).messages) == 13
    with pytest.raises(DecompressionLimitError):
        decode_message_set(nested, max_inflated=60_000)


def test_deep_nesting_is_refused() -> None:
    data = encode_message(b"core")
    for _ in range(10):
        data = encode_message(compress(Compression.GZIP, data), compression=Compression.GZIP)
    with pytest.raises(CompressionError):
        decode_message_set(data)


# --- iter_shallow / validate_message_set -----------------------------------------------------


def test_iter_shallow() -> None:
    wrapper = encode_message_set([b"x", b"y"], compression=Compression.SNAPPY)
    plain0 = encode_message(b"old", magic=0)
    data = plain0 + wrapper + encode_message(b"tail")[:5]
    shallow = list(iter_shallow(data, 10))
    assert shallow == [
        ShallowMessage(10, 10 + len(plain0), 0, Compression.NONE, b"old"),
        ShallowMessage(10 + len(plain0), 10 + len(plain0) + len(wrapper), 1,
                       Compression.SNAPPY, wrapper[10:]),
    ]


def test_iter_shallow_checks_crc() -> None:
    with pytest.raises(CorruptMessageError):
        list(iter_shallow(raw_message(b"x", crc=0)))


def test_validate_message_set_counts() -> None:
    data = (encode_message_set([b"a" * 10, b"b"])
            + encode_message_set([b"c", b"d", b"e"], compression=Compression.GZIP)
            + encode_message(b"partial")[:-2])
    info = validate_message_set(data)
    wrapper_payload = len(encode_message_set([b"c", b"d", b"e"], compression=1)) - 10
    assert info == SetInfo(valid_bytes=len(data) - 15, shallow_count=3, deep_count=5,
                           max_shallow_payload=max(10, wrapper_payload))


def test_validate_message_set_deep_crc() -> None:
    inner = encode_message(b"ok") + raw_message(b"bad", crc=5)
    wrapper = encode_message(compress(Compression.SNAPPY, inner), compression=2)
    with pytest.raises(CorruptMessageError):
        validate_message_set(wrapper)
    with pytest.raises(DecodeError):
        validate_message_set(raw_message(b"x", magic=9))
