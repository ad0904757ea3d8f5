"""The compiled decoder (``_speedups.c``) against the pure-Python reference, and hostile bytes.

The rest of tests/unit/protocol already runs on both decoders (see conftest.py); here the two
are compared *directly*: on valid, cut, mutated and hostile input both must return the same
messages and valid_bytes, or raise the same error class with the same text and offset.  A
segfault is the worst defect a decoder can have, so the bounded random-bytes loop runs in a
child process: a crash there is a test failure naming the seed, not a dead test run.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_proto_properties import RELAXED, corrupt_wrappers, message_sets, mutated

from zkconsumer.errors import (
    CompressionError,
    InvalidMessageSizeError,
    LocalProtocolError,
    ZkConsumerError,
)
from zkconsumer.protocol import (
    Compression,
    accel,
    compress,
    decode_batch,
    decode_message_set,
    encode_message,
    encode_message_set,
    messageset,
    validate_message_set,
)

#: This module compares the two decoders itself: conftest.py runs it once, not per decoder.
COMPARES_BOTH = True

Outcome = tuple[object, ...]


def _outcome(fn: Callable[[], object]) -> Outcome:
    try:
        result = fn()
    except ZkConsumerError as exc:
        return ("error", type(exc), str(exc), getattr(exc, "offset", None))
    return ("ok", result)


def _both(data: bytes, base: int = 0, max_inflated: int = 1 << 20,
          deep: bool = True) -> tuple[Outcome, Outcome]:
    """(compiled, pure) outcomes of decode_message_set and decode_batch on the same input."""
    ext = accel.speedups
    if ext is None:
        pytest.skip(f"compiled decoder unavailable: {accel.REASON}")
    saved = messageset._speedups
    results = []
    try:
        for which in (ext, None):
            messageset._speedups = which
            listed = _outcome(lambda: decode_message_set(
                data, base, max_inflated=max_inflated, deep=deep))
            batched = _outcome(lambda: decode_batch(
                data, base, max_inflated=max_inflated, deep=deep))
            if batched[0] == "ok":
                batch = batched[1]
                assert listed[0] == "ok"
                assert batch.messages() == listed[1].messages  # type: ignore[attr-defined]
                assert (batch.valid_bytes, batch.size) == listed[1][1:]  # type: ignore[index]
            else:
                assert batched == listed
            results.append(listed)
    finally:
        messageset._speedups = saved
    return results[0], results[1]


def _same(data: bytes, **kwargs: int) -> Outcome:
    """Both decoders agree on decode_message_set, decode_batch and validate_message_set."""
    compiled, pure = _both(data, **kwargs)
    assert compiled == pure
    cap = kwargs.get("max_inflated", 1 << 20)
    saved = messageset._speedups
    try:
        validated = []
        for which in (accel.speedups, None):
            messageset._speedups = which
            validated.append(_outcome(lambda: validate_message_set(data, max_inflated=cap)))
    finally:
        messageset._speedups = saved
    assert validated[0] == validated[1]
    return pure


def _child_decoder(pure: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ZKCONSUMER_PURE"}
    if pure is not None:
        env["ZKCONSUMER_PURE"] = pure
    return subprocess.run(
        [sys.executable, "-c", "import zkconsumer.protocol as p; print(p.DECODER)"],
        env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_zkconsumer_pure_forces_the_pure_path() -> None:
    default = _child_decoder(None)
    if not os.environ.get("ZKCONSUMER_PURE"):
        assert default == accel.IMPLEMENTATION
    assert _child_decoder("1") == _child_decoder("yes") == "pure"
    assert _child_decoder("0") == _child_decoder("") == default


def test_the_compiled_walk_refuses_the_same_nesting_depth() -> None:
    if accel.speedups is None:
        pytest.skip(f"compiled decoder unavailable: {accel.REASON}")
    assert accel.speedups.MAX_NESTING == messageset.MAX_NESTING


@pytest.mark.parametrize("depth", [1, 4, 5, 6])
def test_nested_wrappers_agree(depth: int) -> None:
    """A wrapper holding a wrapper ... (depth levels): expanded up to MAX_NESTING."""
    data = encode_message_set([b"a", b"bc"], compression=Compression.GZIP)
    for i in range(depth - 1):
        codec = Compression.SNAPPY if i % 2 else Compression.GZIP
        data = encode_message(compress(codec, data), compression=codec)
    outcome = _same(data, base=77)
    if depth <= messageset.MAX_NESTING:
        assert outcome[0] == "ok"
    else:
        assert outcome[1] is CompressionError and outcome[3] == 77


@pytest.mark.parametrize("length", [0, 4, 5, 0x7FFFFFFF, -1, -(2**31)])
def test_extreme_lengths(length: int) -> None:
    good = encode_message(b"ok")
    for tail in (b"", b"\x01\x00" + b"\x00" * 8):
        outcome = _same(good + struct.pack(">i", length) + tail, base=1000)
        if length < 5:
            assert outcome[1] is InvalidMessageSizeError and outcome[3] == 1000 + len(good)
        elif length > len(tail):  # does not fit: a partial tail, not an error
            assert outcome[0] == "ok"
            assert outcome[1][1] == len(good)  # type: ignore[index]
        else:  # 5 bytes of magic 1: too short for its header
            assert outcome[1] is InvalidMessageSizeError and "for magic 1" in str(outcome[2])


def test_offsets_beyond_int64_take_the_pure_path() -> None:
    data = encode_message_set([b"x", b"y"])
    for base in (2**62 - 5, 2**62, -(2**62), 2**63 - 1 - len(data)):
        assert _same(data, base=base)[0] == "ok"
    assert decode_message_set(data, 2**70).messages[0][0] == 2**70
    with pytest.raises(LocalProtocolError):
        decode_batch(data, 2**63 - len(data))


def test_bounded_decompression_agrees() -> None:
    wrapper = encode_message_set([b"z" * 1000] * 20, compression=Compression.GZIP)
    for cap in (0, 1, 10_000, 20_139, 20_140, 10**9, -1):
        compiled, pure = _both(wrapper, max_inflated=cap)
        if pure[0] == "error":
            assert compiled == pure
        else:
            assert compiled[0] == "ok" and compiled[1] == pure[1]


def test_bad_inner_crc_is_reported_at_the_wrapper() -> None:
    inner = bytearray(encode_message_set([b"first", b"second"]))
    inner[-1] ^= 1
    wrapper = encode_message(compress(Compression.SNAPPY, bytes(inner)),
                             compression=Compression.SNAPPY)
    outcome = _same(encode_message(b"plain") + wrapper, base=50)
    assert outcome[0] == "error" and outcome[3] == 50 + len(encode_message(b"plain"))
    assert "inside the compressed message: CRC mismatch" in str(outcome[2])


@settings(max_examples=150, deadline=None, suppress_health_check=RELAXED)
@given(message_sets(), st.integers(0, 2**40), st.booleans(), st.data())
def test_valid_and_cut_sets_agree(case: tuple[bytes, list[bytes]], base: int, deep: bool,
                                  data: st.DataObject) -> None:
    raw = case[0]
    cut = data.draw(st.integers(0, len(raw)))
    assert _same(raw, base=base, deep=deep)[0] == "ok"
    _same(raw[:cut], base=base, deep=deep)


@settings(max_examples=300, deadline=None, suppress_health_check=RELAXED)
@given(st.one_of(mutated(), corrupt_wrappers(), st.binary(max_size=400)),
       st.sampled_from([0, 100, 1 << 20]))
def test_hostile_input_agrees(data: bytes, max_inflated: int) -> None:
    _same(data, base=3, max_inflated=max_inflated)


_HOSTILE_LOOP = r"""
import random, struct, sys
from zkconsumer.errors import ZkConsumerError
from zkconsumer.protocol import Compression, compress, encode_message, encode_message_set
from zkconsumer.protocol import accel, messageset
ext = accel.speedups
assert ext is not None, accel.REASON
seed = int(sys.argv[1])
rng = random.Random(seed)
EXTREMES = [0, 1, 4, 5, 6, 7, 0x7FFFFFFF, 0x7FFFFFF0, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFA]
def valid():
    payloads = [rng.randbytes(rng.randrange(0, 40)) for _ in range(rng.randrange(0, 6))]
    codec = rng.choice([0, 0, 1, 2])
    return encode_message_set(payloads, compression=codec, magic=rng.choice([0, 1]) if codec == 0 else 1)
def wrapped(blob):
    codec = rng.choice([1, 2])
    body = compress(codec, blob) if rng.random() < 0.7 else blob
    return encode_message(body, compression=codec)
for i in range(int(sys.argv[2])):
    kind = rng.randrange(4)
    if kind == 0:
        data = bytearray(rng.randbytes(rng.randrange(0, 64)))
    else:
        data = bytearray(b"".join(valid() for _ in range(rng.randrange(1, 4))))
        if kind == 3:
            data = bytearray(wrapped(bytes(data)))
        for _ in range(rng.randrange(1, 4)):
            if not data:
                break
            pos = rng.randrange(len(data))
            op = rng.randrange(4)
            if op == 0:
                data[pos:pos + 4] = struct.pack(">I", rng.choice(EXTREMES))
            elif op == 1:
                data[pos] ^= rng.randrange(1, 256)
            elif op == 2:
                del data[pos:]
            else:
                data[pos:pos] = rng.randbytes(rng.randrange(1, 12))
        if kind == 2:  # damage under a correct CRC: reaches the inner walk
            data = bytearray(wrapped(bytes(data)))
    blob = bytes(data)
    for fn in (ext.decode, ext.decode_batch):
        for deep in (True, False):
            try:
                fn(blob, rng.choice([0, 9, 2**62 - 1]), rng.choice([0, 50, 1 << 20]), deep,
                   messageset._inflate_at)
            except ZkConsumerError:
                pass
    try:
        ext.validate(blob, rng.choice([0, 50, 1 << 20]), messageset._inflate_at)
    except ZkConsumerError:
        pass
print("ok")
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_random_hostile_bytes_never_crash_the_compiled_walk(seed: int) -> None:
    if accel.speedups is None:
        pytest.skip(f"compiled decoder unavailable: {accel.REASON}")
    proc = subprocess.run([sys.executable, "-c", _HOSTILE_LOOP, str(seed), "20000"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (
        f"seed {seed}: exit {proc.returncode}\n{proc.stderr[-2000:]}")


def test_the_compiled_crc_is_zlibs_at_every_length() -> None:
    """The carry-less-multiply CRC folds 64/16-byte blocks: check every tail length."""
    ext = accel.speedups
    if ext is None:
        pytest.skip(f"compiled decoder unavailable: {accel.REASON}")
    blob = os.urandom(4096 + 16)
    for n in [*range(0, 600), 1023, 1024, 1025, 4095, 4096]:
        for start in (0, 1, 7, 15):
            chunk = blob[start:start + n]
            assert ext.crc32(chunk) == zlib.crc32(chunk), (n, start, ext.CRC32)


def test_a_batch_is_an_arrow_large_binary_column_without_copying_values() -> None:
    pa = pytest.importorskip("pyarrow")
    payloads = [b"", b"one", b"x" * 300, b"three"]
    data = encode_message_set(payloads[:2]) + encode_message_set(
        payloads[2:], compression=Compression.GZIP)
    batch = decode_batch(data, 500)
    column = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(batch),
        [None, pa.py_buffer(batch.value_offsets), pa.py_buffer(batch.values)])
    assert column.to_pylist() == payloads
    assert list(batch.offsets) == [500, 510, 523, 523]  # entries of 10 and 13 bytes
    assert batch.payloads() == payloads and batch.value(2) == b"x" * 300
    assert (batch.valid_bytes, batch.incomplete, batch.too_large) == (len(data), False, False)
