"""Fetch and multifetch conformance: every fetch row of REFERENCE §4.2 and §4.8, over TCP."""

from __future__ import annotations

import struct

import pytest
from broker_wire import Wire, frame, raw_fetch, raw_topic
from fixtures.waiting import wait_until

from zkconsumer.protocol import (
    Compression,
    FetchResponse,
    decode_fetch_response,
    decode_message_set,
    decode_multifetch_response,
    encode_message_set,
)

MSG = encode_message_set([b"0123456789"])  # one magic-1 message: 4 + 6 + 10 = 20 bytes
assert len(MSG) == 20


@pytest.fixture
def broker(dev_broker):  # standalone: these rows do not involve ZooKeeper
    return dev_broker(zk=False, num_partitions=2, topic_partitions={"wide": 5})


@pytest.fixture
def wire(broker):
    with Wire(broker.host, broker.port) as w:
        yield w


def test_no_log_yet_partition_in_range_is_empty_and_creates_nothing(broker, wire):
    assert wire.fetch("nolog", 1, 0) == FetchResponse(0, b"")
    assert wire.fetch("wide", 4, 0) == FetchResponse(0, b"")
    assert wire.fetch("nolog", 0, 12345) == FetchResponse(0, b"")  # any offset: no log, no check
    assert list(broker.log_dir.iterdir()) == []  # KAFKA-101: fetch never creates a log


@pytest.mark.parametrize("topic,partition", [("t", 2), ("t", -1), ("t", 99), ("wide", 5),
                                             ("wide", -7)])
def test_partition_out_of_range_or_negative_is_error_3(broker, wire, topic, partition):
    assert wire.fetch(topic, partition, 0) == FetchResponse(3, b"")
    assert list(broker.log_dir.iterdir()) == []


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "x" * 256, "bad\x01name", "del\x7f",
                                   "\u00ff\u0085"])
def test_illegal_topic_is_error_minus_1(wire, topic):
    body = wire.request(raw_fetch(topic, 0, 0, 1000))
    assert decode_fetch_response(body) == FetchResponse(-1, b"")


def test_longest_legal_names_pass_the_validator(wire):
    for n in (253, 254, 255):  # 254/255 pass the check (but cannot get a log dir, see produce)
        assert wire.fetch("n" * n, 0, 0) == FetchResponse(0, b"")


def test_offset_rows(wire):
    wire.produce("t", 0, MSG)
    wire.produce("t", 0, MSG)
    data = MSG + MSG
    assert wire.end("t", 0) == 40
    assert wire.fetch("t", 0, -1) == FetchResponse(1, b"")  # before the log start
    assert wire.fetch("t", 0, 41) == FetchResponse(1, b"")  # past the flushed end
    assert wire.fetch("t", 0, 1 << 40) == FetchResponse(1, b"")
    assert wire.fetch("t", 0, 40) == FetchResponse(0, b"")  # == end: empty, no error
    assert wire.fetch("t", 0, 0) == FetchResponse(0, data)
    assert wire.fetch("t", 0, 20) == FetchResponse(0, MSG)
    # misaligned: raw bytes from there, error 0 (no boundary check in 0.7)
    assert wire.fetch("t", 0, 5) == FetchResponse(0, data[5:])
    # maxSize smaller than the first message: a truncated message, error 0
    assert wire.fetch("t", 0, 0, 7) == FetchResponse(0, data[:7])
    assert wire.fetch("t", 0, 0, 25) == FetchResponse(0, data[:25])
    assert wire.fetch("t", 0, 0, 0) == FetchResponse(0, b"")
    # the other partition of the same topic has no log
    assert wire.fetch("t", 1, 0) == FetchResponse(0, b"")
    assert wire.fetch("t", 1, 5) == FetchResponse(0, b"")


def test_negative_max_size_writes_a_header_then_closes(wire):
    """The reference writes int32(n+2), int16 0, then fails transferTo(count<0) and closes."""
    wire.produce("t", 0, MSG)
    assert wire.end("t", 0) == 20
    wire.send_raw(raw_fetch("t", 0, 0, -5))
    assert struct.unpack(">ih", wire.recv_exact(6)) == (-3, 0)
    assert wire.is_closed()


def test_negative_max_size_at_end_is_a_normal_empty_answer(wire):
    wire.produce("t", 0, MSG)
    assert wire.end("t", 0) == 20
    assert wire.fetch("t", 0, 20, -5) == FetchResponse(0, b"")


def test_multifetch_answers_in_request_order_with_per_set_errors(wire):
    wire.produce("t", 0, MSG)
    wire.produce("t", 1, MSG + MSG)
    assert wire.end("t", 1) == 40
    resp = wire.multifetch([("t", 1, 0, 1000), ("t", 0, 0, 1000), ("t", 9, 0, 1000),
                            ("t", 0, 999, 1000), ("none", 0, 0, 1000), ("t", 1, 20, 5),
                            ("t", 0, 20, 1000)])
    assert resp.error == 0
    assert [(r.error, r.messages) for r in resp.responses] == [
        (0, MSG + MSG), (0, MSG), (3, b""), (1, b""), (0, b""), (0, MSG[:5]), (0, b"")]


def test_multifetch_with_an_illegal_topic_part(wire):
    wire.produce("t", 0, MSG)
    assert wire.end("t", 0) == 20
    body = (struct.pack(">h", 2)                                        # count
            + raw_topic("a/b") + struct.pack(">iqi", 0, 0, 100)         # illegal topic
            + raw_topic("t") + struct.pack(">iqi", 0, 0, 100))          # a good part
    resp = decode_multifetch_response(wire.request(frame(2, body)))
    assert [(r.error, r.messages) for r in resp.responses] == [(-1, b""), (0, MSG)]


def test_empty_multifetch(wire):
    resp = decode_multifetch_response(wire.request(frame(2, struct.pack(">h", 0))))
    assert resp.error == 0 and resp.responses == ()


def test_fetch_never_crosses_a_segment_boundary(dev_broker):
    b = dev_broker(zk=False, log_file_size=50)
    with Wire(b.host, b.port) as w:
        for _ in range(4):  # rolls before the 4th append: the 1st segment holds 60 bytes
            w.produce("t", 0, MSG)
        assert w.end("t", 0) == 80
        assert w.fetch("t", 0, 0) == FetchResponse(0, MSG * 3)  # stops at the boundary
        assert w.fetch("t", 0, 40) == FetchResponse(0, MSG)
        assert w.fetch("t", 0, 60) == FetchResponse(0, MSG)
        assert w.fetch("t", 0, 50) == FetchResponse(0, (MSG * 3)[50:])  # misaligned, same rule
        resp = w.multifetch([("t", 0, 0, 1 << 20), ("t", 0, 60, 1 << 20)])
        assert [r.messages for r in resp.responses] == [MSG * 3, MSG]
    names = sorted(p.name for p in (b.log_dir / "t-0").iterdir())
    assert names == ["00000000000000000000.kafka", "00000000000000000060.kafka"]


def test_only_flushed_data_is_visible_count_based(dev_broker):
    b = dev_broker(zk=False, flush_interval=3, flush_interval_ms=10**8,
                   flush_scheduler_interval_ms=10**8)
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, MSG)
        w.produce("t", 0, MSG)
        assert w.fetch("t", 0, 0) == FetchResponse(0, b"")  # 40 bytes written, none flushed
        assert w.offsets("t", 0, -1) == (0,)
        assert w.fetch("t", 0, 20) == FetchResponse(1, b"")  # beyond the high-water mark
        assert (b.log_dir / "t-0" / "00000000000000000000.kafka").stat().st_size == 40
        w.produce("t", 0, MSG)  # the 3rd message triggers the flush
        assert w.fetch("t", 0, 0) == FetchResponse(0, MSG * 3)
        # deep messages count: one gzip wrapper holding 3 messages flushes too
        w.produce("t", 0, encode_message_set([b"a", b"b", b"c"], compression=Compression.GZIP))
        assert w.end("t", 0) > 60


def test_only_flushed_data_is_visible_time_based(dev_broker):
    b = dev_broker(zk=False, flush_interval=10**6, flush_interval_ms=50,
                   flush_scheduler_interval_ms=20)
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, MSG)
        wait_until(lambda: w.fetch("t", 0, 0).messages == MSG, what="the timed flush")


def test_gzip_wrapper_around_an_empty_set_stays_invisible_until_next_append(dev_broker):
    b = dev_broker(zk=False, flush_interval=1, flush_interval_ms=30,
                   flush_scheduler_interval_ms=10)
    empty_wrapper = encode_message_set([], compression=Compression.GZIP)
    segment = b.log_dir / "t-0" / "00000000000000000000.kafka"
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, empty_wrapper)
        wait_until(lambda: segment.exists() and segment.stat().st_size == len(empty_wrapper),
                   what="the wrapper on disk")
        # counted as 0 messages: neither the count nor the timer flushes it
        b.broker.manager.flush_due()
        assert w.end("t", 0) == 0
        assert w.fetch("t", 0, 0) == FetchResponse(0, b"")
        w.produce("t", 0, MSG)  # the next normal append flushes both
        end = len(empty_wrapper) + len(MSG)
        assert w.end("t", 0) == end
        got = w.fetch("t", 0, 0)
        assert got.messages == empty_wrapper + MSG
        assert decode_message_set(got.messages).messages == [
            (len(empty_wrapper), end, b"0123456789")]


def test_large_fetch_goes_out_whole(dev_broker):
    b = dev_broker(zk=False)
    payloads = [bytes([i % 251]) * 1000 for i in range(3000)]  # ~3 MB
    data = encode_message_set(payloads)
    with Wire(b.host, b.port) as w:
        w.produce("big", 0, data)
        assert w.end("big", 0) == len(data)
        assert w.fetch("big", 0, 0, 64 << 20).messages == data
        assert w.fetch("big", 0, 1006, 1 << 20).messages == data[1006:1006 + (1 << 20)]
