"""Segment-file reader: discovery, offsets, chunking, torn tails and corruption reports."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkconsumer.client.logdir import ReadStats, discover, iter_partition, iter_segment_chunks
from zkconsumer.errors import ConfigurationError, CorruptSegmentError
from zkconsumer.protocol import Compression, decode_message_set, encode_message_set
from zkconsumer.protocol.logformat import parse_partition_dir, parse_segment_name, segment_name


def _write_partition(root: Path, name: str, segments: list[bytes]) -> Path:
    """Write segments the way the broker names them: each starts where the previous ends."""
    d = root / name
    d.mkdir(parents=True)
    start = 0
    for data in segments:
        (d / segment_name(start)).write_bytes(data)
        start += len(data)
    return d


SEG_A = (encode_message_set([b"a0", b"a1"])
         + encode_message_set([b"g0", b"g1", b"g2"], compression=Compression.GZIP)
         + encode_message_set([b"x" * 300]))
SEG_B = (encode_message_set([b"s0", b"s1"], compression=Compression.SNAPPY)
         + encode_message_set([b"b0"], magic=0))


def _expected(*segments: bytes) -> list[tuple[int, int, bytes]]:
    whole = b"".join(segments)
    decoded = decode_message_set(whole)
    assert decoded.valid_bytes == len(whole)
    return decoded.messages


@pytest.mark.parametrize(("name", "parsed"), [
    ("orders-0", ("orders", 0)),
    ("my-topic-12", ("my-topic", 12)),
    ("a-b-c-3", ("a-b-c", 3)),
    ("orders", None),
    ("orders-", None),
    ("-3", None),
    ("orders-x", None),
    ("orders-1a", None),
])
def test_parse_partition_dir_splits_at_last_dash(name: str, parsed: object) -> None:
    assert parse_partition_dir(name) == parsed


def test_segment_names_are_20_digit_byte_offsets() -> None:
    assert segment_name(1234) == "00000000000000001234.kafka"
    assert parse_segment_name("00000000000000001234.kafka") == 1234
    # the broker loads any run of digits (Log.loadSegments parses the stem with toLong)
    assert parse_segment_name("1234.kafka") == 1234
    assert parse_segment_name("x1234.kafka") is None
    assert parse_segment_name("00000000000000001234.kafka.deleted") is None


def test_discover_sorts_and_filters(tmp_path: Path) -> None:
    _write_partition(tmp_path, "my-topic-1", [SEG_A])
    _write_partition(tmp_path, "my-topic-0", [SEG_A, SEG_B])
    _write_partition(tmp_path, "other-0", [SEG_B])
    (tmp_path / "my-topic-0" / "junk.txt").write_text("x")
    (tmp_path / "cleaner-offset-checkpoint").write_text("x")
    found = discover(str(tmp_path))
    assert [(p.topic, p.partition) for p in found] == [
        ("my-topic", 0), ("my-topic", 1), ("other", 0)]
    p0 = found[0]
    assert [s.start for s in p0.segments] == [0, len(SEG_A)]
    assert p0.end == len(SEG_A) + len(SEG_B) and p0.gaps() == []
    assert [p.partition for p in discover(str(tmp_path), topics=["my-topic"], partition=1)] == [1]
    with pytest.raises(ConfigurationError, match="does not exist"):
        discover(str(tmp_path / "missing"))


@pytest.mark.parametrize("chunk", [16, 64, 100, 4096])
def test_offsets_match_a_fetch_of_the_whole_log(tmp_path: Path, chunk: int) -> None:
    _write_partition(tmp_path, "t-0", [SEG_A, SEG_B])
    (plog,) = discover(str(tmp_path))
    stats = ReadStats()
    got = [m for seg_i, seg in enumerate(plog.segments)
           for c in iter_segment_chunks(seg, last=seg_i == 1, chunk_size=chunk, stats=stats)
           for m in c]
    assert got == _expected(SEG_A, SEG_B)
    assert [m[2] for m in got] == [b"a0", b"a1", b"g0", b"g1", b"g2", b"x" * 300,
                                   b"s0", b"s1", b"b0"]
    # inner messages of the gzip wrapper: all but the last point back at the wrapper start
    wrapper = len(encode_message_set([b"a0", b"a1"]))
    assert got[2][:2] == (wrapper, wrapper) and got[4][0] == wrapper and got[4][1] > wrapper
    assert stats.messages == 9 and stats.bytes == len(SEG_A) + len(SEG_B)
    assert stats.next_offset == plog.end and stats.issues == []


def test_torn_tail_in_last_segment_is_reported_not_raised(tmp_path: Path) -> None:
    torn = SEG_B + encode_message_set([b"lost message"])[:-3]
    _write_partition(tmp_path, "t-0", [SEG_A, torn])
    (plog,) = discover(str(tmp_path))
    stats = ReadStats()
    got = list(iter_partition(plog, stats=stats))
    assert got == _expected(SEG_A, SEG_B)
    (issue,) = stats.issues
    assert issue.kind == "torn-tail" and issue.position == len(SEG_B)
    assert issue.offset == len(SEG_A) + len(SEG_B) and issue.path.endswith(segment_name(len(SEG_A)))
    assert stats.next_offset == len(SEG_A) + len(SEG_B)


def test_partial_message_in_a_middle_segment_is_corruption(tmp_path: Path) -> None:
    _write_partition(tmp_path, "t-0", [SEG_A[:-5], SEG_B])
    (plog,) = discover(str(tmp_path))
    with pytest.raises(CorruptSegmentError, match="not the last segment") as info:
        list(iter_partition(plog))
    assert info.value.path == plog.segments[0].path
    stats = ReadStats()
    got = list(iter_partition(plog, on_corrupt="skip", stats=stats))
    assert [m[2] for m in got][-3:] == [b"s0", b"s1", b"b0"]
    assert [i.kind for i in stats.issues] == ["corrupt"]


def test_crc_corruption_names_file_and_position(tmp_path: Path) -> None:
    bad = bytearray(SEG_B)
    bad[-1] ^= 0xFF  # last byte of the magic-0 message's payload
    _write_partition(tmp_path, "t-0", [bytes(bad), SEG_A])
    (plog,) = discover(str(tmp_path))
    bad_pos = len(encode_message_set([b"s0", b"s1"], compression=Compression.SNAPPY))
    with pytest.raises(CorruptSegmentError) as info:
        list(iter_partition(plog))
    err = info.value
    assert (err.path, err.position, err.offset) == (plog.segments[0].path, bad_pos, bad_pos)
    assert "CorruptMessageError" in str(err) and plog.segments[0].path in str(err)
    stats = ReadStats()
    got = list(iter_partition(plog, on_corrupt="skip", stats=stats))
    assert [m[2] for m in got] == [b"s0", b"s1", b"a0", b"a1", b"g0", b"g1", b"g2", b"x" * 300]
    assert stats.issues[0].position == bad_pos


def test_garbage_length_is_corruption_even_at_the_end(tmp_path: Path) -> None:
    _write_partition(tmp_path, "t-0", [SEG_A + b"\xff\xff\xff\xff\x00"])
    (plog,) = discover(str(tmp_path))
    with pytest.raises(CorruptSegmentError) as info:
        list(iter_partition(plog))
    assert info.value.position == len(SEG_A)


def test_start_end_range_keeps_wrapper_with_the_range_where_it_starts(tmp_path: Path) -> None:
    _write_partition(tmp_path, "t-0", [SEG_A, SEG_B])
    (plog,) = discover(str(tmp_path))
    wrapper = len(encode_message_set([b"a0", b"a1"]))
    first = list(iter_partition(plog, end=wrapper + 1))
    rest = list(iter_partition(plog, start=first[-1][1]))
    assert [m[2] for m in first] == [b"a0", b"a1", b"g0", b"g1", b"g2"]
    assert first + rest == _expected(SEG_A, SEG_B)
    with pytest.raises(ConfigurationError):
        list(iter_segment_chunks(plog.segments[1], start=0))


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=len(SEG_A) + len(SEG_B)))
def test_any_cut_of_the_last_segment_yields_a_prefix(tmp_path_factory: pytest.TempPathFactory,
                                                     cut: int) -> None:
    root = tmp_path_factory.mktemp("cut")
    data = (SEG_A + SEG_B)[:cut]
    _write_partition(root, "t-0", [data])
    (plog,) = discover(str(root))
    stats = ReadStats()
    got = list(iter_partition(plog, stats=stats))
    full = _expected(SEG_A, SEG_B)
    assert got == full[:len(got)]
    assert stats.next_offset in (None, *[m[1] for m in full])
    assert [i.kind for i in stats.issues] in ([], ["torn-tail"])


def test_odd_files_zero_byte_segments_and_gaps(tmp_path: Path) -> None:
    """Names other than ``<digits>.kafka`` and dirs without ``-`` are ignored; empty segments read as nothing;
    a gap between segments (a missing file: lost bytes) is reported, not silently skipped."""
    d = _write_partition(tmp_path, "t-0", [SEG_A, b""])  # empty last segment (fresh roll)
    (d / segment_name(len(SEG_A) + 1000)).write_bytes(SEG_B)  # a segment is missing before it
    (d / "x123.kafka").write_bytes(b"junk")
    (d / f"{segment_name(len(SEG_A))}.deleted").write_bytes(b"junk")
    (tmp_path / "nodash").mkdir()
    (tmp_path / "t-x").mkdir()
    (plog,) = discover(str(tmp_path))
    assert [s.size for s in plog.segments] == [len(SEG_A), 0, len(SEG_B)]
    assert plog.gaps() == [(len(SEG_A), len(SEG_A) + 1000)]
    stats = ReadStats()
    got = list(iter_partition(plog, stats=stats))
    assert [m[2] for m in got] == [m[2] for m in _expected(SEG_A)] + [b"s0", b"s1", b"b0"]
    assert got[-1][0] > len(SEG_A) + 1000  # offsets keep the segment's own start
    # before: no issue at all, the 1000 missing bytes vanished without a trace
    assert [(i.kind, i.offset) for i in stats.issues] == [("gap", len(SEG_A) + 1000)]
    assert f"previous one ends at {len(SEG_A)}" in stats.issues[0].detail
