"""Property tests: round trips of every value type, cut points of message sets, and fuzzing.

The fuzz tests encode the codec's hard rule: on malformed input nothing but zkconsumer's own
errors escapes a decoder (no struct.error, IndexError, zlib.error, snappy errors, ...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zkconsumer.errors import ZkConsumerError
from zkconsumer.protocol import (
    Compression,
    FetchRequest,
    FetchResponse,
    FrameReader,
    MultiFetchRequest,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    compress,
    decode_fetch_response,
    decode_message_set,
    decode_multifetch_response,
    decode_offsets_response,
    decode_request,
    decompress,
    encode_fetch_response,
    encode_message,
    encode_message_set,
    encode_multifetch_response,
    encode_offsets_response,
    encode_request,
    iter_shallow,
    validate_message_set,
)

# Timing health checks are off: the suite runs on a shared, busy 2-core machine.
RELAXED = [HealthCheck.too_slow, HealthCheck.large_base_example, HealthCheck.data_too_large]
FAST = settings(max_examples=60, deadline=None, suppress_health_check=RELAXED)

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
topics = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E,
                               blacklist_characters="/"), min_size=1, max_size=40).filter(
    lambda t: t not in (".", ".."))
payload_lists = st.lists(st.binary(max_size=300), max_size=8)
codecs = st.sampled_from(list(Compression))

fetches = st.builds(FetchRequest, topics, int32, int64, int32)
produces = st.builds(ProduceRequest, topics, int32, st.binary(max_size=200))
requests = st.one_of(
    produces,
    fetches,
    st.builds(OffsetsRequest, topics, int32, int64, int32),
    st.builds(MultiFetchRequest, st.lists(fetches, max_size=5).map(tuple)),
    st.builds(MultiProduceRequest, st.lists(produces, max_size=5).map(tuple)),
)


@st.composite
def message_sets(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A set of several chunks, each plain (magic 0/1) or one compressed wrapper."""
    data = []
    payloads: list[bytes] = []
    for _ in range(draw(st.integers(1, 5))):
        chunk = draw(payload_lists)
        codec = draw(codecs)
        magic = draw(st.sampled_from([0, 1])) if codec == Compression.NONE else 1
        data.append(encode_message_set(chunk, compression=codec, magic=magic))
        payloads.extend(chunk)
    return b"".join(data), payloads


# --- round trips -----------------------------------------------------------------------------


@FAST
@given(requests)
def test_request_round_trip(req: object) -> None:
    frame = encode_request(req)  # type: ignore[arg-type]
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert decode_request(frame[4:]) == req


@FAST
@given(int16, st.binary(max_size=500))
def test_fetch_response_round_trip(error: int, messages: bytes) -> None:
    assert decode_fetch_response(encode_fetch_response(error, messages)[4:]) == FetchResponse(
        error, messages)


@FAST
@given(st.lists(st.builds(FetchResponse, int16, st.binary(max_size=100)), max_size=6))
def test_multifetch_response_round_trip(parts: list[FetchResponse]) -> None:
    frame = encode_multifetch_response(parts)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    decoded = decode_multifetch_response(frame[4:])
    assert decoded.error == 0
    assert list(decoded.responses) == parts


@FAST
@given(st.lists(int64, max_size=20), int16)
def test_offsets_response_round_trip(offsets: list[int], error: int) -> None:
    decoded = decode_offsets_response(encode_offsets_response(offsets, error)[4:])
    assert decoded.offsets == tuple(offsets)
    assert decoded.error == error


@FAST
@given(payload_lists, codecs, st.sampled_from([0, 1]), st.integers(0, 2**40))
def test_message_set_round_trip(payloads: list[bytes], codec: Compression, magic: int,
                                base: int) -> None:
    data = encode_message_set(payloads, compression=codec, magic=magic)
    decoded = decode_message_set(data, base)
    assert [m[2] for m in decoded.messages] == payloads
    assert decoded.valid_bytes == len(data)
    if codec == Compression.NONE:
        pos = base
        for offset, next_offset, payload in decoded.messages:
            assert offset == pos
            assert next_offset == pos + 4 + (6 if magic else 5) + len(payload)
            pos = next_offset
    elif payloads:
        assert {m[0] for m in decoded.messages} == {base}
        assert [m[1] for m in decoded.messages] == [base] * (len(payloads) - 1) + [
            base + len(data)]
    info = validate_message_set(data)
    assert info.deep_count == len(payloads)
    assert info.shallow_count == (len(payloads) if codec == Compression.NONE else 1)


@FAST
@given(st.binary(max_size=100_000), st.sampled_from([Compression.GZIP, Compression.SNAPPY]))
def test_compression_round_trip(data: bytes, codec: Compression) -> None:
    assert decompress(codec, compress(codec, data)) == data


@FAST
@given(st.lists(st.binary(max_size=50), max_size=6), st.data())
def test_frame_reader_any_chunking(bodies: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(len(b).to_bytes(4, "big") + b for b in bodies)
    reader = FrameReader()
    got = []
    pos = 0
    while pos < len(stream):
        step = data.draw(st.integers(1, 16))
        reader.feed(stream[pos:pos + step])
        pos += step
        while (frame := reader.next_frame()) is not None:
            got.append(frame)
    assert got == bodies


# --- cut points ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=RELAXED)
@given(message_sets())
def test_every_cut_point_decodes_to_a_prefix(case: tuple[bytes, list[bytes]]) -> None:
    """Any prefix of a valid set decodes without raising, to a prefix, at a boundary."""
    data, payloads = case
    boundaries = {0} | {m.next_offset for m in iter_shallow(data)}
    full = decode_message_set(data).messages
    for cut in range(len(data) + 1):
        decoded = decode_message_set(data[:cut])
        assert decoded.valid_bytes in boundaries
        assert decoded.valid_bytes <= cut
        assert decoded.messages == full[:len(decoded.messages)]
        shallow_end = max((b for b in boundaries if b <= cut), default=0)
        assert decoded.valid_bytes == shallow_end
    assert [m[2] for m in full] == payloads


# --- fuzzing ---------------------------------------------------------------------------------

DECODERS: list[Callable[[bytes], object]] = [
    decode_message_set,
    lambda b: decode_message_set(b, deep=False),
    lambda b: list(iter_shallow(b)),
    validate_message_set,
    decode_request,
    decode_fetch_response,
    decode_multifetch_response,
    decode_offsets_response,
    lambda b: decompress(Compression.GZIP, b),
    lambda b: decompress(Compression.SNAPPY, b),
]


def _only_our_errors(data: bytes) -> None:
    for decoder in DECODERS:
        with contextlib.suppress(ZkConsumerError):
            decoder(data)


@settings(max_examples=300, deadline=None, suppress_health_check=RELAXED)
@given(st.binary(max_size=300))
def test_fuzz_random_bytes(data: bytes) -> None:
    _only_our_errors(data)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """Valid frames and message sets with bytes flipped, inserted, deleted or truncated."""
    base = draw(st.one_of(
        message_sets().map(lambda c: c[0]),
        requests.map(lambda r: encode_request(r)[4:]),
        st.lists(st.builds(FetchResponse, int16, message_sets().map(lambda c: c[0])),
                 max_size=3).map(lambda p: encode_multifetch_response(p)[4:]),
        st.binary(max_size=2000).map(lambda d: compress(Compression.SNAPPY, d)),
        st.binary(max_size=2000).map(lambda d: compress(Compression.GZIP, d)),
    ))
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        pos = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["flip", "insert", "delete", "cut", "int"]))
        if op == "flip":
            data[pos] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif op == "cut":
            del data[pos:]
        else:  # overwrite 4 bytes with an extreme int32 (lengths, counts)
            value = draw(st.sampled_from([0, 1, 5, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]))
            data[pos:pos + 4] = value.to_bytes(4, "big")
    return bytes(data)


@st.composite
def corrupt_wrappers(draw: st.DrawFn) -> bytes:
    """Wrappers whose compressed payload is damaged but whose CRC is right, so the damage
    reaches the decompressor and the inner-set decoder instead of stopping at the CRC."""
    codec = draw(st.sampled_from([Compression.GZIP, Compression.SNAPPY]))
    inner = draw(message_sets().map(lambda c: c[0]))
    blob = bytearray(compress(codec, inner) if draw(st.booleans()) else inner)
    for _ in range(draw(st.integers(0, 3))):
        if not blob:
            break
        pos = draw(st.integers(0, len(blob) - 1))
        if draw(st.booleans()):
            blob[pos] ^= draw(st.integers(1, 255))
        else:
            del blob[pos:pos + draw(st.integers(1, 6))]
    return encode_message(bytes(blob), compression=codec)


@settings(max_examples=200, deadline=None, suppress_health_check=RELAXED)
@given(corrupt_wrappers())
def test_fuzz_wrappers_with_valid_crc(data: bytes) -> None:
    for deep_decoder in (decode_message_set, validate_message_set):
        with contextlib.suppress(ZkConsumerError):
            deep_decoder(data)


@settings(max_examples=300, deadline=None, suppress_health_check=RELAXED)
@given(mutated())
def test_fuzz_mutated_valid_input(data: bytes) -> None:
    _only_our_errors(data)


@settings(max_examples=100, deadline=None, suppress_health_check=RELAXED)
@given(st.binary(max_size=300))
def test_fuzz_as_bytearray_and_memoryview(data: bytes) -> None:
    """Every buffer type gives the same result, or the same error at the same offset."""

    def outcome(buf: bytes | bytearray | memoryview) -> object:
        try:
            return decode_message_set(buf)
        except ZkConsumerError as exc:
            return type(exc), getattr(exc, "offset", None)

    expected = outcome(data)
    for view in (bytearray(data), memoryview(data)):
        assert outcome(view) == expected
