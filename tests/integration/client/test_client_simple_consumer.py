"""SimpleConsumer and produce against real in-process dev brokers (no ZooKeeper needed)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from zkconsumer.client import (
    BrokerConnection,
    FetchedMessage,
    SimpleConsumer,
    multiproduce,
    produce,
    query_offsets,
)
from zkconsumer.errors import (
    ConnectionClosedError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    ProduceRejectedError,
    WrongPartitionError,
)
from zkconsumer.protocol import (
    EARLIEST_TIME,
    LATEST_TIME,
    Compression,
    FetchRequest,
    ProduceRequest,
    encode_message_set,
)


@pytest.fixture
def broker(dev_broker: Any) -> Any:
    return dev_broker(zk=False, num_partitions=2)


def consumer_for(broker: Any, **kwargs: Any) -> SimpleConsumer:
    return SimpleConsumer(broker.host, broker.port, socket_timeout=10.0, **kwargs)


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec_with_reference_offsets(broker: Any, codec: Compression) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    first = [b"first-%d" % i for i in range(3)]
    second = [b"second-%d" % i for i in range(2)]
    set1 = encode_message_set(first, compression=codec)
    set2 = encode_message_set(second, compression=codec)
    produce(conn, "rt", 0, set1, confirm=True)
    produce(conn, "rt", 0, set2, confirm=True)
    conn.close()
    with consumer_for(broker) as consumer:
        got = list(consumer.iter_messages("rt", 0, 0))
        assert [m.value for m in got] == first + second
        end1, end2 = len(set1), len(set1) + len(set2)
        assert consumer.latest_offset("rt", 0) == end2
        if codec == Compression.NONE:
            assert got[0].offset == 0 and got[2].next_offset == end1
            assert all(a.next_offset == b.offset for a, b in itertools.pairwise(got))
        else:
            # inner messages: all but the last get the wrapper START, the last its END
            assert [(m.offset, m.next_offset) for m in got[:3]] == [(0, 0), (0, 0), (0, end1)]
            assert [(m.offset, m.next_offset) for m in got[3:]] == [(end1, end1), (end1, end2)]
        # resuming from any next_offset replays nothing twice past it
        assert [m.value for m in consumer.iter_messages("rt", 0, got[2].next_offset)] == second


def test_iterator_crosses_segment_boundaries(dev_broker: Any) -> None:
    broker = dev_broker(zk=False, log_file_size=300)
    conn = BrokerConnection(broker.host, broker.port)
    values = [b"v%03d-" % i + b"x" * 40 for i in range(60)]
    for i in range(0, 60, 3):  # 20 sets of 3 messages, ~168 bytes each -> many segments
        produce(conn, "seg", 0, encode_message_set(values[i:i + 3]), confirm=True)
    segments = sorted((broker.log_dir / "seg-0").glob("*.kafka"))
    assert len(segments) > 5
    with consumer_for(broker, fetch_size=1 << 20) as consumer:
        # one fetch stops at the first segment's end: a short answer is not the end
        first = consumer.fetch("seg", 0, 0)
        assert len(first.messages) == segments[0].stat().st_size < 1 << 20
        got = list(consumer.iter_messages("seg", 0, 0))
    assert [m.value for m in got] == values
    assert all(a.next_offset == b.offset for a, b in itertools.pairwise(got))


def test_fetch_size_grows_for_a_big_message_then_gives_up_at_the_cap(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    produce(conn, "big", 0, encode_message_set([b"small", b"L" * 1000, b"tail"]), confirm=True)
    huge_at = 15 + 1010 + 14
    produce(conn, "big", 0, encode_message_set([b"H" * 5000]), confirm=True)
    with consumer_for(broker, fetch_size=64, max_fetch_size=4096) as consumer:
        it = consumer.iter_messages("big", 0, 0)
        assert [next(it).value for _ in range(3)] == [b"small", b"L" * 1000, b"tail"]
        with pytest.raises(MessageTooLargeError) as info:
            next(it)
    err = info.value
    assert (err.topic, err.partition, err.offset, err.size) == ("big", 0, huge_at, 5010)
    assert "max_fetch_size=4096" in str(err)
    # a bigger cap reads it
    with consumer_for(broker, fetch_size=64, max_fetch_size=8192) as consumer:
        assert [m.value for m in consumer.iter_messages("big", 0, huge_at)] == [b"H" * 5000]


def test_fetch_size_below_a_length_prefix_still_terminates(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    produce(conn, "tiny", 0, encode_message_set([b"abc"]), confirm=True)
    with consumer_for(broker, fetch_size=2, max_fetch_size=16) as consumer:
        assert [m.value for m in consumer.iter_messages("tiny", 0, 0)] == [b"abc"]
    with consumer_for(broker, fetch_size=1, max_fetch_size=2) as consumer, \
            pytest.raises(MessageTooLargeError):
        list(consumer.iter_messages("tiny", 0, 0))


def test_offset_out_of_range_is_reported_with_the_valid_range(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    data = encode_message_set([b"a", b"b"])
    produce(conn, "oor", 0, data, confirm=True)
    with consumer_for(broker) as consumer:
        with pytest.raises(OffsetOutOfRangeError) as info:
            consumer.fetch("oor", 0, 10_000)
        assert (info.value.topic, info.value.partition, info.value.offset) == ("oor", 0, 10_000)
        with pytest.raises(OffsetOutOfRangeError, match=rf"\[0, {len(data)}\]"):
            list(consumer.iter_messages("oor", 0, 10_000))
        # the end itself is in range: empty, the iterator just stops
        assert list(consumer.iter_messages("oor", 0, len(data))) == []


def test_offsets_and_query_offsets(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    with consumer_for(broker) as consumer:
        assert consumer.offsets("none-yet", 0, LATEST_TIME, 5) == [0]
        produce(conn, "off", 1, encode_message_set([b"12345"]), confirm=True)
        assert consumer.latest_offset("off", 1) == 15
        assert consumer.earliest_offset("off", 1) == 0
        assert consumer.offsets("off", 1, LATEST_TIME, 5) == [15, 0]
    assert query_offsets(broker.host, broker.port, "off", 1, EARLIEST_TIME, 1) == [0]
    # 0.7 answers an invalid partition on an offsets request by closing the connection
    with consumer_for(broker) as consumer, \
            pytest.raises(ConnectionClosedError, match="invalid topic or partition"):
        consumer.offsets("off", 7, LATEST_TIME, 1)


def test_multifetch_reports_errors_per_set(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    produce(conn, "mf", 0, encode_message_set([b"p0"]), confirm=True)
    produce(conn, "mf", 1, encode_message_set([b"p1"]), confirm=True)
    with consumer_for(broker) as consumer:
        answers = consumer.multifetch([FetchRequest("mf", 0, 0, 1000),
                                       FetchRequest("mf", 9, 0, 1000),
                                       FetchRequest("mf", 1, 0, 1000)])
        assert [a.error for a in answers] == [0, 3, 0]
        assert answers[0].messages == encode_message_set([b"p0"])
        assert answers[2].messages == encode_message_set([b"p1"])
        with pytest.raises(WrongPartitionError) as info:
            consumer.fetch("mf", 9, 0)
        assert info.value.partition == 9


def test_confirmed_produce_detects_rejections(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    # partition out of range on this broker (num_partitions=2)
    with pytest.raises(ProduceRejectedError) as info:
        produce(conn, "rej", 2, encode_message_set([b"lost"]), confirm=True)
    assert (info.value.topic, info.value.partition) == ("rej", 2)
    # a corrupt set (one flipped payload byte: CRC mismatch)
    corrupt = bytearray(encode_message_set([b"good", b"evil"]))
    corrupt[-1] ^= 0xFF
    with pytest.raises(ProduceRejectedError, match="not written"):
        produce(conn, "rej", 0, bytes(corrupt), confirm=True)
    # multiproduce: parts before the bad one are written, the bad one and later ones not
    with pytest.raises(ProduceRejectedError, match=r"1 part\(s\) before it were written") as info:
        multiproduce(conn, [ProduceRequest("rej", 0, encode_message_set([b"kept"])),
                            ProduceRequest("rej", 1, bytes(corrupt)),
                            ProduceRequest("rej", 0, encode_message_set([b"dropped"]))],
                     confirm=True)
    assert info.value.partition == 1
    # the connection recovers by itself and confirmed produce works again
    produce(conn, "rej", 1, encode_message_set([b"after"]), confirm=True)
    with consumer_for(broker) as consumer:
        assert [m.value for m in consumer.iter_messages("rej", 0, 0)] == [b"kept"]
        assert [m.value for m in consumer.iter_messages("rej", 1, 0)] == [b"after"]


def test_unconfirmed_multiproduce_and_random_partition(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    multiproduce(conn, [ProduceRequest("mp", 0, encode_message_set([b"a"])),
                        ProduceRequest("mp", 1, encode_message_set([b"b"]))])
    produce(conn, "mp", -1, encode_message_set([b"anywhere"]), confirm=True)
    with consumer_for(broker) as consumer:
        values = [m.value for p in (0, 1) for m in consumer.iter_messages("mp", p, 0)]
    assert sorted(values) == [b"a", b"anywhere", b"b"]


def test_follow_mode_polls_at_the_end(broker: Any) -> None:
    conn = BrokerConnection(broker.host, broker.port)
    produce(conn, "tail", 0, encode_message_set([b"one"]), confirm=True)
    waits: list[float] = []

    def idle(seconds: float) -> None:  # the broker has nothing new: produce while "waiting"
        waits.append(seconds)
        produce(conn, "tail", 0, encode_message_set([b"two"]), confirm=True)

    consumer = SimpleConsumer(broker.host, broker.port, idle_wait=0.25, sleep=idle)
    it = consumer.iter_messages("tail", 0, 0, stop_at_end=False)
    assert next(it) == FetchedMessage(0, 13, b"one")
    assert next(it).value == b"two"
    assert waits == [0.25]
    consumer.close()


def test_consumer_survives_a_broker_restart(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    conn = BrokerConnection(broker.host, broker.port)
    produce(conn, "rs", 0, encode_message_set([b"before"]), confirm=True)
    consumer = consumer_for(broker)
    assert [m.value for m in consumer.iter_messages("rs", 0, 0)] == [b"before"]
    broker = dev_broker.restart(broker)
    # the old connection is dead; the idempotent fetch is retried once on a new one
    assert [m.value for m in consumer.iter_messages("rs", 0, 0)] == [b"before"]
    consumer.close()
