"""`decode_valid_prefix`: the whole messages in front of a corrupt one, plus its error."""

from __future__ import annotations

import pytest

from zkconsumer.errors import CorruptMessageError, DecodeError, UnknownMagicError
from zkconsumer.protocol import Compression, decode_message_set, encode_message_set
from zkconsumer.protocol.prefix import decode_valid_prefix


def _set(payloads: list[bytes]) -> bytearray:
    return bytearray(encode_message_set(payloads))


def test_clean_set_is_decoded_as_decode_message_set_does() -> None:
    buf = bytes(_set([b"a", b"bb"])) + encode_message_set([b"c"])[:5]  # partial tail
    decoded, error = decode_valid_prefix(buf, 100)
    assert error is None
    assert decoded == decode_message_set(buf, 100)


@pytest.mark.parametrize("cut", [0, 1, 2, 5])
def test_corrupt_entry_returns_the_messages_before_it(cut: int) -> None:
    payloads = [b"p%d" % i for i in range(6)]
    buf = _set(payloads)
    entry = len(buf) // 6
    buf[cut * entry + entry - 1] ^= 0xFF  # last payload byte of entry `cut`: CRC mismatch
    with pytest.raises(CorruptMessageError):
        decode_message_set(bytes(buf), 1000)
    decoded, error = decode_valid_prefix(bytes(buf), 1000)
    assert isinstance(error, CorruptMessageError) and error.offset == 1000 + cut * entry
    assert [m[2] for m in decoded.messages] == payloads[:cut]
    assert decoded.valid_bytes == cut * entry and decoded.size == len(buf)


def test_bad_magic_after_a_compressed_wrapper() -> None:
    wrapper = encode_message_set([b"x", b"y"], compression=Compression.GZIP)
    tail = bytearray(encode_message_set([b"z"]))
    tail[4] = 7  # magic byte
    decoded, error = decode_valid_prefix(memoryview(wrapper + bytes(tail)))
    assert isinstance(error, UnknownMagicError) and error.offset == len(wrapper)
    assert [m[2] for m in decoded.messages] == [b"x", b"y"]
    assert decoded.valid_bytes == len(wrapper)


def test_a_wrapper_with_a_bad_inner_message_is_not_split() -> None:
    good = encode_message_set([b"ok"])
    wrapper = bytearray(encode_message_set([b"x"], compression=Compression.GZIP))
    wrapper[-3] ^= 0xFF  # inside the gzip stream: decompression or CRC fails
    decoded, error = decode_valid_prefix(good + bytes(wrapper), 50)
    assert isinstance(error, DecodeError) and error.offset == 50 + len(good)
    assert [m[2] for m in decoded.messages] == [b"ok"]
