"""`decode_batch_valid_prefix`: the batch form of `decode_valid_prefix` (same prefix, same error)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from test_proto_properties import RELAXED, message_sets, mutated

from zkconsumer.protocol import DECODER, accel, active_decoder, encode_message_set
from zkconsumer.protocol.batch import decode_batch_valid_prefix
from zkconsumer.protocol.prefix import decode_valid_prefix


def _same_as_the_list_form(data: bytes, base: int) -> None:
    decoded, error = decode_valid_prefix(data, base)
    batch, batch_error = decode_batch_valid_prefix(data, base)
    assert batch.messages() == decoded.messages
    assert (batch.valid_bytes, batch.size) == (decoded.valid_bytes, decoded.size)
    if error is None:
        assert batch_error is None
    else:
        assert batch_error is not None
        assert (type(batch_error), str(batch_error), batch_error.offset) == (
            type(error), str(error), error.offset)


def test_corrupt_entry_after_good_ones() -> None:
    data = bytearray(encode_message_set([b"a", b"bb", b"ccc"]))
    data[-1] ^= 0xFF  # CRC mismatch in the third entry
    batch, error = decode_batch_valid_prefix(bytes(data), 40)
    assert batch.payloads() == [b"a", b"bb"] and error is not None
    assert error.offset == 40 + batch.valid_bytes and batch.size == len(data)
    _same_as_the_list_form(bytes(data), 40)


@settings(max_examples=150, deadline=None, suppress_health_check=RELAXED)
@given(st.one_of(mutated(), message_sets().map(lambda c: c[0])), st.integers(0, 2**40))
def test_batch_prefix_matches_the_list_prefix(data: bytes, base: int) -> None:
    _same_as_the_list_form(data, base)


def test_active_decoder_follows_the_fixture(decoder: str) -> None:
    assert active_decoder() == decoder
    assert DECODER == accel.IMPLEMENTATION
