"""The producer's batch encoder is byte for byte the protocol's `encode_message_set`, with
the compiled extension's CRC and without it (every test runs on both when it is built)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.producer import encoding
from zkconsumer.producer.encoding import encode_set
from zkconsumer.protocol import Compression, accel, decode_message_set, encode_message_set

CRCS = ["compiled", "pure"] if getattr(accel.speedups, "crc32", None) else ["pure"]


@pytest.fixture(scope="module", params=CRCS, autouse=True)
def crc(request: pytest.FixtureRequest) -> Iterator[str]:
    """Module-scoped (hypothesis tests may use it): the CRC function `encode_set` uses."""
    saved = encoding._compiled_crc
    encoding._compiled_crc = saved if request.param == "compiled" else None
    try:
        yield request.param
    finally:
        encoding._compiled_crc = saved


@given(st.lists(st.binary(max_size=300), max_size=40))
def test_plain_sets_are_identical(payloads: list[bytes]) -> None:
    assert encode_set(payloads) == encode_message_set(payloads)


@given(st.lists(st.binary(min_size=500, max_size=2000), min_size=4, max_size=8))
def test_large_payloads_take_the_other_crc_and_are_identical(payloads: list[bytes]) -> None:
    assert encode_set(payloads) == encode_message_set(payloads)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY])
def test_compressed_sets_are_identical_and_decode(codec: Compression) -> None:
    payloads = [b"event %d " % i * (i % 7 + 1) for i in range(300)]
    data = encode_set(payloads, codec)
    assert data == encode_message_set(payloads, compression=codec)
    assert [m[2] for m in decode_message_set(data).messages] == payloads
