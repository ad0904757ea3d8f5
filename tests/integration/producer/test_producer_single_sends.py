"""Async mode with one message per ``send()`` (the path applications use per event), against
real dev brokers: routing per send, order, the queue policies, failures, close."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fixtures.waiting import wait_until
from producerkit import read_values

from zkconsumer.client import SimpleConsumer
from zkconsumer.errors import DeliveryError, ProducerError, QueueFullError
from zkconsumer.producer import PartitionChooser, Producer, ProducerConfig, ProducerStats
from zkconsumer.producer.cluster import StaticClusterView
from zkconsumer.producer.pool import ConnectionPool
from zkconsumer.producer.queue import Chunk
from zkconsumer.producer.sender import Dispatcher
from zkconsumer.protocol import iter_shallow


def broker_list(*brokers: Any) -> str:
    return ",".join(f"{b.broker_id}:{b.host}:{b.port}" for b in brokers)


def test_each_single_send_is_routed_alone_and_order_is_kept(dev_broker: Any) -> None:
    b0, b1 = dev_broker.many(2, zk=False, num_partitions=1)
    values = [b"m%04d" % i for i in range(2000)]
    with Producer(broker_list=broker_list(b0, b1), producer_type="async", batch_size=64,
                  partitioner="round-robin", rng=lambda n: 0, confirm=True) as producer:
        for v in values:
            producer.send("rr", v)
        producer.flush()
        assert producer.stats.messages_sent == 2000 and producer.stats.failed == 0
    assert read_values(b0, "rr", 0) == values[0::2]  # round robin per send, not per batch
    assert read_values(b1, "rr", 0) == values[1::2]


def test_singles_keys_and_multi_sends_keep_their_order_on_one_partition(
        dev_broker: Any) -> None:
    broker = dev_broker(zk=False, num_partitions=1)
    expected: list[bytes] = []
    with Producer(broker_list=broker_list(broker), producer_type="async", batch_size=7,
                  queue_size=50, enqueue_timeout_ms=-1, confirm=True) as producer:
        for i in range(300):
            if i % 10 == 3:
                batch = [b"multi%d-%d" % (i, j) for j in range(4)]
                producer.send("mix", batch)
                expected += batch
            else:
                v = b"single%d" % i
                producer.send("mix", v, key=None if i % 3 else f"k{i % 5}")
                expected.append(v)
    assert read_values(broker, "mix", 0) == expected


@pytest.mark.parametrize("timeout_ms", [0, 40])
def test_a_full_queue_refuses_a_single_send(dev_broker: Any, timeout_ms: int) -> None:
    broker = dev_broker(zk=False)
    producer = Producer(broker_list=broker_list(broker), producer_type="async", queue_size=2,
                        enqueue_timeout_ms=timeout_ms, batch_size=1000,
                        queue_time_ms=600_000, confirm=True)
    producer.send("full", b"a")
    producer.send("full", b"b")
    start = time.monotonic()
    with pytest.raises(QueueFullError):
        producer.send("full", b"c")
    assert time.monotonic() - start >= timeout_ms / 1000 * 0.9
    assert producer.stats.dropped == 1
    producer.close()
    assert read_values(broker, "full", 0) == [b"a", b"b"]


def test_a_full_queue_blocks_a_single_send_until_there_is_room(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    producer = Producer(broker_list=broker_list(broker), producer_type="async", queue_size=2,
                        enqueue_timeout_ms=-1, batch_size=1000, queue_time_ms=600_000,
                        confirm=True)
    producer.send("block", b"a")
    producer.send("block", b"b")
    done = threading.Event()
    t = threading.Thread(target=lambda: (producer.send("block", b"c"), done.set()))
    t.start()
    assert not done.wait(0.05)  # blocked (bounded check, not a sleep-to-wait)
    producer.flush()  # sends a and b: room for c
    wait_until(done.is_set, what="blocked send to complete")
    t.join()
    producer.close()  # close sends c
    assert read_values(broker, "block", 0) == [b"a", b"b", b"c"]
    assert producer.stats.dropped == 0


def test_single_sends_after_a_broker_death_are_reported(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    reported: list[tuple[str, list[bytes]]] = []
    producer = Producer(broker_list=broker_list(broker), producer_type="async",
                        batch_size=1000, queue_time_ms=600_000, confirm=True,
                        num_retries=1, retry_backoff_ms=0, connect_timeout_ms=1000,
                        on_error=lambda t, m, e: reported.append((t, m)))
    for i in range(10):
        producer.send("dies", b"ok%d" % i)
    producer.flush()
    assert read_values(broker, "dies", 0) == [b"ok%d" % i for i in range(10)]
    broker.stop()
    lost = [b"lost%d" % i for i in range(10)]
    for v in lost:
        producer.send("dies", v)
    with pytest.raises(DeliveryError, match="10 message") as info:
        producer.flush()
    assert [p for _, ms in info.value.messages for p in ms] == lost
    assert [p for _, ms in reported for p in ms] == lost
    assert producer.stats.failed == 10 and producer.stats.messages_sent == 10
    producer.close()
    with pytest.raises(ProducerError, match="closed"):
        producer.send("dies", b"after close")


def test_concurrent_single_senders_lose_nothing_and_keep_their_order(dev_broker: Any) -> None:
    broker = dev_broker(zk=False, num_partitions=1)
    producer = Producer(broker_list=broker_list(broker), producer_type="async", batch_size=50,
                        queue_size=300, enqueue_timeout_ms=-1, confirm=True)

    def sender(t: int) -> None:
        for i in range(3000):
            producer.send("conc", b"t%d-%05d" % (t, i), key=None if i % 4 else f"k{t}")

    threads = [threading.Thread(target=sender, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    producer.close()
    values = read_values(broker, "conc", 0)
    assert len(values) == 12000 and producer.stats.messages_sent == 12000
    for t in range(4):  # each thread's messages exactly once, in its order
        assert [v for v in values if v.startswith(b"t%d-" % t)] == [
            b"t%d-%05d" % (t, i) for i in range(3000)]


def test_single_sends_to_a_compressed_topic(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    values = [b"event %d of a compressible stream" % i for i in range(500)]
    with Producer(broker_list=broker_list(broker), producer_type="async", batch_size=200,
                  compression_codec="gzip", confirm=True) as producer:
        for v in values:
            producer.send("gz", v)
    assert read_values(broker, "gz", 0) == values


def test_batches_sent_together_stay_separate_sets_in_one_request(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    config = ProducerConfig(broker_list=broker_list(broker), compression_codec="gzip")
    stats = ProducerStats()
    pool = ConnectionPool(config)
    dispatcher = Dispatcher(config, StaticClusterView(config), pool, stats,
                            PartitionChooser("hash"))
    first = [Chunk("sets", None, [b"a", b"b"], True), Chunk("sets", None, [b"c"])]
    second = [Chunk("sets", None, [b"d", b"e"], True)]
    try:
        assert dispatcher.send_batches([first, second]) == []
    finally:
        pool.close_all()
    assert stats.requests == 1 and stats.messages_sent == 5  # one MULTIPRODUCE
    wait_until(lambda: read_values(broker, "sets", 0) == [b"a", b"b", b"c", b"d", b"e"],
               what="both sets appended")
    with SimpleConsumer(broker.host, broker.port) as consumer:
        wrappers = list(iter_shallow(consumer.fetch("sets", 0, 0).messages))
    assert len(wrappers) == 2  # one gzip wrapper per batch, not one for both
