"""PartitionLog, LogManager and produce validation without sockets (injected clocks)."""

from __future__ import annotations

import os
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkconsumer.broker.config import BrokerConfig
from zkconsumer.broker.handlers import MessageSizeTooLarge, check_message_set
from zkconsumer.broker.log import LogSettings, PartitionLog, recover_file
from zkconsumer.broker.manager import LogManager
from zkconsumer.errors import (
    CompressionError,
    CorruptMessageError,
    InvalidMessageSizeError,
    OffsetOutOfRangeError,
    UnknownMagicError,
    WrongPartitionError,
)
from zkconsumer.protocol import Compression, compress, encode_message, encode_message_set
from zkconsumer.protocol.logformat import segment_name

MSG = encode_message_set([b"0123456789"])  # 20 bytes


class Clock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def make_log(tmp_path, clock=None, **settings) -> PartitionLog:
    d = tmp_path / "t-0"
    d.mkdir(exist_ok=True)
    values = {"segment_size": 1 << 30, "flush_interval": 1, "roll_ms": 10**12}
    values.update(settings)
    return PartitionLog(d, "t", 0, LogSettings(**values), clock_ms=clock or Clock())


def read_bytes(plog: PartitionLog, offset: int, n: int) -> bytes:
    region = plog.read(offset, n)
    return os.pread(region.fd, region.length, region.position) if region.length > 0 else b""


def test_segment_names_are_20_digit_offsets():
    assert segment_name(0) == "00000000000000000000.kafka"
    assert segment_name(286894308) == "00000000000286894308.kafka"


def test_new_log_has_one_empty_segment(tmp_path):
    plog = make_log(tmp_path)
    assert [p.name for p in (tmp_path / "t-0").iterdir()] == [segment_name(0)]
    assert plog.high_water_mark == 0 and plog.start_offset == 0
    assert plog.read(0, 100).length == 0
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(1, 100)


def test_flush_counts_messages_and_empty_flush_is_a_no_op(tmp_path):
    clock = Clock()
    plog = make_log(tmp_path, clock, flush_interval=3)
    plog.append(MSG, 1)
    plog.append(MSG, 1)
    assert plog.high_water_mark == 0 and plog.size_written == 40
    assert plog.unflushed_messages == 2
    clock.ms += 5
    plog.flush()
    assert plog.high_water_mark == 40 and plog.last_flushed_ms == clock.ms
    plog.append(b"bytes-without-messages", 0)  # like a gzip wrapper around an empty set
    clock.ms += 5
    plog.flush()
    assert plog.high_water_mark == 40 and plog.last_flushed_ms == clock.ms - 5
    plog.append(MSG, 3)  # reaches the interval: everything becomes visible
    assert plog.high_water_mark == 40 + 22 + 20


def test_roll_by_size_happens_before_the_append_after_exceeding(tmp_path):
    plog = make_log(tmp_path, segment_size=40)
    for _ in range(3):
        plog.append(MSG, 1)  # 20, 40 (not > 40), 60
    assert len(plog.segments) == 1
    plog.append(MSG, 1)
    assert [(s.start, s.size) for s in plog.segments] == [(0, 60), (60, 20)]
    assert read_bytes(plog, 0, 1000) == MSG * 3  # never crosses the boundary
    assert read_bytes(plog, 60, 1000) == MSG


def test_roll_by_age(tmp_path):
    clock = Clock()
    plog = make_log(tmp_path, clock, roll_ms=1000)
    plog.append(MSG, 1)
    clock.ms += 1000
    plog.append(MSG, 1)  # exactly the age: no roll (strictly greater in the reference)
    clock.ms += 1
    plog.append(MSG, 1)  # older than roll_ms: a new segment first
    assert [(s.start, s.size) for s in plog.segments] == [(0, 40), (40, 20)]


def test_offsets_before_table(tmp_path):
    clock = Clock(10_000_000)
    plog = make_log(tmp_path, clock, segment_size=20)
    for _ in range(3):
        plog.append(MSG, 1)  # segments 0, 40 (0 holds 40), then 40 holds 20
    starts = [s.start for s in plog.segments]
    assert starts == [0, 40]
    for s, ms in zip(plog.segments, (1000, 2000), strict=True):
        os.utime(s.path, ns=(ms * 10**6, ms * 10**6))
    assert plog.offsets_before(-1, 10) == [60, 40, 0]
    assert plog.offsets_before(-2, 10) == [0]
    assert plog.offsets_before(999, 10) == []
    assert plog.offsets_before(1000, 10) == [0]
    assert plog.offsets_before(2500, 10) == [40, 0]
    assert plog.offsets_before(2500, 1) == [40]
    assert plog.offsets_before(clock.ms, 10) == [60, 40, 0]
    assert plog.offsets_before(-1, 0) == []


def test_retention_keeps_the_last_segment(tmp_path):
    plog = make_log(tmp_path, segment_size=20)
    for _ in range(5):
        plog.append(MSG, 1)  # 0:[40] 40:[40] 80:[20]
    gone = plog.delete_oldest_while(lambda s: True)
    assert [s.start for s in gone] == [0, 40, 80]
    assert [(s.start, s.size) for s in plog.segments] == [(100, 0)]  # rolled, then kept
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 10)
    assert plog.offsets_before(-2, 1) == [100]


def test_manager_retention_by_size(tmp_path):
    config = BrokerConfig(broker_id=0, log_dir=str(tmp_path / "logs"), log_file_size=20,
                          flush_interval=1, log_retention_size=50)
    m = LogManager(config)
    plog = m.get_or_create_log("t", 0)
    for _ in range(5):
        plog.append(MSG, 1)
    assert m.cleanup() == 1  # 100 bytes, keep >= 50: drop the first 40-byte segment only
    assert plog.start_offset == 40
    assert sorted(p.name for p in (tmp_path / "logs" / "t-0").iterdir()) == [
        segment_name(40), segment_name(80)]
    m.close()


def test_manager_checks_topic_then_partition(tmp_path):
    m = LogManager(BrokerConfig(broker_id=0, log_dir=str(tmp_path / "l"), num_partitions=2,
                                topic_partitions={"w": 4}))
    with pytest.raises(WrongPartitionError):
        m.get_log("t", 2)
    assert m.get_log("w", 3) is None
    created = []
    m2 = LogManager(m.config, on_new_topic=created.append)
    m2.get_or_create_log("w", 3)
    m2.get_or_create_log("w", 1)
    m2.get_or_create_log("x", 0)
    assert created == ["w", "x"]  # once per topic
    assert m2.topics() == ["w", "x"]


def test_recover_file_stops_at_the_first_bad_entry(tmp_path):
    path = tmp_path / "seg"
    path.write_bytes(MSG * 3 + MSG[:-1] + b"\x00" + MSG)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert recover_file(fd, path.stat().st_size) == 60
    finally:
        os.close(fd)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20), st.integers(0, 10_000))
def test_recovery_of_any_cut_keeps_exactly_the_whole_messages(tmp_path_factory, payloads, cut):
    data = encode_message_set(payloads) if payloads else b""
    cut = min(cut, len(data))
    path = tmp_path_factory.mktemp("rec") / "seg"
    path.write_bytes(data[:cut])
    boundaries = [0]
    for p in payloads:
        boundaries.append(boundaries[-1] + 10 + len(p))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert recover_file(fd, cut) == max(b for b in boundaries if b <= cut)
    finally:
        os.close(fd)


def test_recovery_of_a_message_larger_than_a_chunk(tmp_path):
    big = encode_message_set([b"q" * (9 * 1024 * 1024)])
    path = tmp_path / "seg"
    path.write_bytes(big + MSG + b"\x00\x00")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert recover_file(fd, path.stat().st_size) == len(big) + 20
    finally:
        os.close(fd)


# ---------------------------------------------------------------- produce validation


def test_check_message_set_counts_deep_messages_and_valid_bytes():
    gz = encode_message_set([b"a", b"b", b"c"], compression=Compression.GZIP)
    empty_gz = encode_message_set([], compression=Compression.GZIP)
    data = MSG + gz + empty_gz + encode_message_set([b"old"], magic=0)
    assert check_message_set(data, 1000) == (len(data), 1 + 3 + 0 + 1)
    assert check_message_set(data + MSG[:5], 1000) == (len(data), 5)
    assert check_message_set(b"", 10) == (0, 0)
    assert check_message_set(b"\x00\x00\x00", 10) == (0, 0)


def test_check_message_set_order_of_checks():
    big = encode_message_set([b"x" * 11])
    bad = MSG[:-1] + b"\x00"
    with pytest.raises(MessageSizeTooLarge):
        check_message_set(big + bad, 10)  # the shallow pass meets the oversized one first
    with pytest.raises(CorruptMessageError):
        check_message_set(bad + big, 10)
    wrapper_bad_inside = encode_message(compress(Compression.GZIP, bad),
                                        compression=Compression.GZIP)
    with pytest.raises(MessageSizeTooLarge):
        check_message_set(wrapper_bad_inside + big, 10)  # deep pass never runs
    with pytest.raises(CorruptMessageError):
        check_message_set(wrapper_bad_inside, 1000)


def test_check_message_set_rejections():
    unknown_codec = struct.pack(">iBBI", 6 + 3, 1, 3, zlib.crc32(b"abc")) + b"abc"
    with pytest.raises(CompressionError):
        check_message_set(unknown_codec, 100)
    bad_magic = struct.pack(">iBBI", 6 + 3, 7, 0, zlib.crc32(b"abc")) + b"abc"
    with pytest.raises(UnknownMagicError):
        check_message_set(bad_magic, 100)
    with pytest.raises(InvalidMessageSizeError):
        check_message_set(MSG[:10], 100)  # the first message does not fit
    truncated_inside = encode_message(compress(Compression.GZIP, MSG[:15]),
                                      compression=Compression.GZIP)
    with pytest.raises(InvalidMessageSizeError):
        check_message_set(truncated_inside, 100)
