"""Offsets request conformance: the algorithm of REFERENCE §4.3 and its error rows (§4.8)."""

from __future__ import annotations

import os
import time

import pytest
from broker_wire import Wire, raw_offsets

from zkconsumer.protocol import decode_offsets_response, encode_message_set

MSG = encode_message_set([b"0123456789"])  # 20 bytes
T0 = 1_600_000_000_000  # segment mtimes in ms, set by hand so lookups are deterministic
T1 = T0 + 60_000
T2 = T0 + 120_000


@pytest.fixture
def broker(dev_broker):
    return dev_broker(zk=False, num_partitions=2, log_file_size=50)


@pytest.fixture
def wire(broker):
    with Wire(broker.host, broker.port) as w:
        yield w


@pytest.fixture
def three_segments(broker, wire):
    """Segments starting at 0, 60 and 120 (60 bytes each, the last holds 20): end = 140."""
    for _ in range(7):
        wire.produce("t", 0, MSG)
    assert wire.end("t", 0) == 140
    seg_dir = broker.log_dir / "t-0"
    names = sorted(p.name for p in seg_dir.iterdir())
    assert names == [f"{s:020d}.kafka" for s in (0, 60, 120)]
    for start, ms in ((0, T0), (60, T1), (120, T2)):
        os.utime(seg_dir / f"{start:020d}.kafka", ns=(ms * 10**6, ms * 10**6))
    return wire


def test_latest_returns_the_flushed_end_then_segment_starts(three_segments):
    w = three_segments
    assert w.offsets("t", 0, -1, 1) == (140,)
    assert w.offsets("t", 0, -1, 3) == (140, 120, 60)
    assert w.offsets("t", 0, -1, 100) == (140, 120, 60, 0)
    assert w.offsets("t", 0, -1, 0) == ()


def test_earliest_returns_exactly_the_first_segment_start(three_segments):
    w = three_segments
    assert w.offsets("t", 0, -2, 1) == (0,)
    assert w.offsets("t", 0, -2, 100) == (0,)


def test_time_lookup_is_segment_granular(three_segments):
    w = three_segments
    assert w.offsets("t", 0, T0 - 1, 10) == ()  # older than everything
    assert w.offsets("t", 0, T0, 10) == (0,)
    assert w.offsets("t", 0, T1 - 1, 10) == (0,)
    assert w.offsets("t", 0, T1, 10) == (60, 0)
    assert w.offsets("t", 0, T1, 1) == (60,)
    assert w.offsets("t", 0, T2 + 5, 10) == (120, 60, 0)
    now_ms = time.time_ns() // 10**6
    # later than "now": the (end, now) entry is included
    assert w.offsets("t", 0, now_ms + 3_600_000, 10) == (140, 120, 60, 0)


def test_no_log_answers_zero_for_latest_and_earliest_and_nothing_otherwise(broker, wire):
    assert wire.offsets("none", 1, -1, 5) == (0,)
    assert wire.offsets("none", 1, -2, 5) == (0,)
    assert wire.offsets("none", 1, T0, 5) == ()
    assert wire.offsets("none", 1, -1, 0) == (0,)  # getEmptyOffsets ignores max
    assert list(broker.log_dir.iterdir()) == []


def test_no_log_with_negative_max_still_answers(wire):
    assert wire.offsets("none", 0, -1, -1) == (0,)


def test_empty_last_segment_adds_no_end_entry(wire):
    wire.produce("e", 0, b"")  # creates the log with one empty segment
    assert wire.offsets("e", 0, -1, 10) == (0,)
    assert wire.offsets("e", 0, -2, 10) == (0,)
    assert wire.offsets("e", 0, T0, 10) == ()
    assert wire.offsets("e", 0, 2**62, 10) == (0,)


def test_latest_counts_only_flushed_bytes(dev_broker):
    b = dev_broker(zk=False, flush_interval=2, flush_interval_ms=10**8,
                   flush_scheduler_interval_ms=10**8)
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, MSG)
        assert w.offsets("t", 0, -1, 10) == (0,)
        w.produce("t", 0, MSG)
        assert w.offsets("t", 0, -1, 10) == (40, 0)


@pytest.mark.parametrize("partition", [2, -1, 1000])
def test_partition_out_of_range_closes(wire, partition):
    wire.send_raw(raw_offsets("t", partition, -1, 1))
    assert wire.is_closed()


@pytest.mark.parametrize("topic", ["", "..", "a/b", "y" * 256])
def test_illegal_topic_closes(wire, topic):
    wire.send_raw(raw_offsets(topic, 0, -1, 1))
    assert wire.is_closed()


def test_negative_max_with_a_log_closes(wire):
    wire.produce("t", 0, MSG)
    assert wire.end("t", 0) == 20
    wire.send_raw(raw_offsets("t", 0, -1, -1))
    assert wire.is_closed()


def test_offsets_response_layout(wire):
    """int32 size, int16 error 0, int32 count, count x int64 (descending)."""
    wire.produce("t", 0, MSG)
    wire.send_raw(raw_offsets("t", 0, -1, 5))
    raw = wire.recv_exact(4 + 2 + 4 + 16)
    assert raw == (b"\x00\x00\x00\x16" + b"\x00\x00" + b"\x00\x00\x00\x02"
                   + (20).to_bytes(8, "big") + (0).to_bytes(8, "big"))
    assert decode_offsets_response(raw[4:]).offsets == (20, 0)
