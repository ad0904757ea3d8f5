"""The dev broker's produce check: the compiled fast path answers exactly as the reference walk.

`check_message_set` uses the protocol's (compiled) `validate_message_set` only for whole valid
sets within the size limit; everything else goes through the walk that follows Log.append.
Whatever the input -- valid, cut, bit-flipped, oversized, compressed -- both must give the same
result or the same error.
"""

from __future__ import annotations

import random

import pytest

from zkconsumer.broker import handlers
from zkconsumer.protocol import DECODER, Compression, encode_message_set

pytestmark = pytest.mark.skipif(DECODER != "compiled",
                                reason="compares the compiled fast path with the walk")


def _answer(data: bytes, limit: int) -> tuple[object, ...]:
    try:
        return ("ok", *handlers.check_message_set(data, limit))
    except Exception as exc:  # the exact error is part of the answer
        return (type(exc).__name__, str(exc))


def test_fast_path_and_walk_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20261125)
    fast_taken = 0
    for _ in range(1500):
        parts = []
        for _ in range(rng.randint(1, 4)):
            values = [rng.randbytes(rng.randint(0, 300)) for _ in range(rng.randint(0, 20))]
            codec = rng.choice(list(Compression))
            if values or codec != Compression.NONE:
                parts.append(encode_message_set(values, compression=codec))
        data = b"".join(parts)
        if rng.random() < 0.3:
            data = data[:rng.randint(0, len(data))]
        if rng.random() < 0.2 and data:
            flipped = bytearray(data)
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            data = bytes(flipped)
        limit = rng.choice([100, 1000, 10**6])
        monkeypatch.setattr(handlers, "DECODER", "compiled")
        fast = _answer(data, limit)
        monkeypatch.setattr(handlers, "DECODER", "pure")
        walk = _answer(data, limit)
        assert fast == walk, (data.hex(), limit)
        fast_taken += fast[0] == "ok"
    assert fast_taken > 300  # many accepted sets: the fast path was really exercised
