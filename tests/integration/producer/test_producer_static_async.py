"""broker.list mode, async batching and failure reporting, against real dev brokers."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import pytest
from fixtures.waiting import wait_until
from producerkit import read_layout, read_values

from zkconsumer.client import SimpleConsumer
from zkconsumer.errors import DeliveryError, QueueFullError
from zkconsumer.producer import Producer, ProducerConfig
from zkconsumer.protocol import Compression, iter_shallow


def broker_list(*brokers: Any) -> str:
    return ",".join(f"{b.broker_id}:{b.host}:{b.port}" for b in brokers)


def dead_port() -> int:
    probe = socket.create_server(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


def test_static_mode_spreads_over_brokers_and_lets_the_broker_pick(dev_broker: Any) -> None:
    b0, b1 = dev_broker.many(2, zk=False, num_partitions=3)
    with Producer(broker_list=broker_list(b0, b1), partitioner="round-robin",
                  confirm=True) as producer:
        for i in range(60):
            producer.send("static", b"m%02d" % i)
        assert producer.stats.messages_sent == 60
    layout = read_layout([b0, b1], "static", 3)
    values = sorted(v for vs in layout.values() for v in vs)
    assert values == sorted(b"m%02d" % i for i in range(60))
    assert {b for b, _ in layout} == {0, 1}                  # round robin over brokers
    assert len(layout) >= 4                                  # the brokers picked partitions


def test_static_mode_retries_a_dead_broker_on_another(dev_broker: Any) -> None:
    live = dev_broker(1, zk=False)
    sleeps: list[float] = []
    config = ProducerConfig.from_properties({
        "broker.list": f"0:127.0.0.1:{dead_port()},1:{live.host}:{live.port}",
        "num.retries": "2", "retry.backoff.ms": "20", "connect.timeout.ms": "500",
        "confirm": "true"})
    with Producer(config, rng=lambda n: 0, sleep=sleeps.append) as producer:
        producer.send("retry", [b"a", b"b"])  # first choice: the dead broker 0
        assert producer.stats.retried == 2 and sleeps == [0.02]
    assert read_values(live, "retry", 0) == [b"a", b"b"]


def test_sync_delivery_error_carries_the_messages() -> None:
    sleeps: list[float] = []
    with Producer(broker_list=f"0:127.0.0.1:{dead_port()}", num_retries=2,
                  retry_backoff_ms=5, sleep=sleeps.append) as producer:
        with pytest.raises(DeliveryError, match="2 of 2 message") as info:
            producer.send("lost", [b"x", b"y"])
        assert info.value.messages == [b"x", b"y"]
        assert sleeps == [0.005, 0.005]
        assert producer.stats.failed == 2 and producer.stats.retried == 4


def test_async_flushes_on_batch_size(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    with Producer(broker_list=broker_list(broker), producer_type="async", batch_size=10,
                  queue_time_ms=600_000, confirm=True) as producer:
        for i in range(10):
            producer.send("bs", b"m%d" % i)
        # no flush, no close: the 10th message makes the batch due
        # the broker stores the set before it answers, and the stats count the answer: wait
        # for the count, which comes last
        wait_until(lambda: producer.stats.requests == 1, what="size-triggered batch")
        assert len(read_values(broker, "bs", 0)) == 10  # one (topic, partition) set, one request
        producer.send("bs", b"late")
        assert producer.stats.requests == 1
    assert read_values(broker, "bs", 0)[-1] == b"late"  # sent by close


def test_async_flushes_on_queue_time(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    with Producer(broker_list=broker_list(broker), producer_type="async", batch_size=1000,
                  queue_time_ms=50, confirm=True) as producer:
        producer.send("qt", [b"a", b"b", b"c"])
        wait_until(lambda: read_values(broker, "qt", 0) == [b"a", b"b", b"c"],
                   what="time-triggered batch")


def test_async_close_drains_and_one_multiproduce_per_broker(dev_broker: Any) -> None:
    broker = dev_broker(zk=False, num_partitions=1)
    producer = Producer(broker_list=broker_list(broker), producer_type="async",
                        batch_size=1000, queue_time_ms=600_000, confirm=False)
    for topic in ("t1", "t2", "t3"):
        for i in range(5):
            producer.send(topic, b"%s-%d" % (topic.encode(), i))
    assert producer.stats.requests == 0
    producer.close()
    assert producer.stats.requests == 1  # three sets, one MULTIPRODUCE
    assert producer.stats.messages_sent == 15
    for topic in ("t1", "t2", "t3"):  # unconfirmed: the broker appends a moment later
        wait_until(lambda t=topic: read_values(broker, t, 0) == [  # type: ignore[misc]
            b"%s-%d" % (t.encode(), i) for i in range(5)], what=f"{topic} appended")


def test_async_compression_per_topic(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    with Producer(broker_list=broker_list(broker), producer_type="async",
                  compression_codec=Compression.SNAPPY, compressed_topics=frozenset({"zc"}),
                  queue_time_ms=600_000, confirm=True) as producer:
        producer.send("zc", [b"c%d" % i for i in range(50)])
        producer.send("zp", [b"p%d" % i for i in range(50)])
        producer.flush()
    with SimpleConsumer(broker.host, broker.port) as consumer:
        shallow_c = list(iter_shallow(consumer.fetch("zc", 0, 0).messages))
        shallow_p = list(iter_shallow(consumer.fetch("zp", 0, 0).messages))
    assert [m.compression for m in shallow_c] == [Compression.SNAPPY]  # one wrapper per set
    assert len(shallow_p) == 50 and {m.compression for m in shallow_p} == {Compression.NONE}
    assert read_values(broker, "zc", 0) == [b"c%d" % i for i in range(50)]


def test_async_compressed_batch_over_max_message_size_is_split(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    payloads = [os.urandom(300) for _ in range(20)]  # ~6 KB incompressible
    with Producer(broker_list=broker_list(broker), producer_type="async",
                  compression_codec=Compression.GZIP, max_message_size=1000,
                  queue_time_ms=600_000, confirm=True) as producer:
        producer.send("split", payloads)
        producer.flush()
        assert producer.stats.failed == 0
    with SimpleConsumer(broker.host, broker.port) as consumer:
        wrappers = list(iter_shallow(consumer.fetch("split", 0, 0).messages))
    assert len(wrappers) > 1 and all(len(w.payload) <= 1000 for w in wrappers)
    assert read_values(broker, "split", 0) == payloads


def test_async_failures_reach_on_error_and_flush() -> None:
    reported: list[tuple[str, list[bytes], Exception]] = []
    called = threading.Event()

    def on_error(topic: str, messages: list[bytes], exc: Exception) -> None:
        reported.append((topic, messages, exc))
        called.set()

    producer = Producer(broker_list=f"0:127.0.0.1:{dead_port()}", producer_type="async",
                        num_retries=1, retry_backoff_ms=0, queue_time_ms=600_000,
                        on_error=on_error)
    producer.send("nowhere", [b"1", b"2"])
    with pytest.raises(DeliveryError, match="2 message") as info:
        producer.flush()
    assert info.value.messages == [("nowhere", [b"1", b"2"])]
    assert called.is_set() and reported[0][:2] == ("nowhere", [b"1", b"2"])
    assert "cannot connect" in str(reported[0][2])
    assert producer.stats.failed == 2 and producer.stats.retried == 2
    producer.flush()  # reported once: the next flush is clean
    producer.close()


def test_async_queue_full_policy_raises_and_counts(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    producer = Producer(broker_list=broker_list(broker), producer_type="async", queue_size=2,
                        enqueue_timeout_ms=0, batch_size=1000, queue_time_ms=600_000,
                        confirm=True)
    producer.send("full", [b"a", b"b"])
    with pytest.raises(QueueFullError):
        producer.send("full", b"c")
    assert producer.stats.dropped == 1
    producer.close()
    assert read_values(broker, "full", 0) == [b"a", b"b"]
