"""Helpers of the bridge tests (modern Kafka -> 0.7): write records into tansu, read 0.7
partitions back whole, register a 0.7 topic the 0.7 way, start a `Bridge` in a thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mirror_helpers import MirrorThread

from zkconsumer.client import BrokerConnection, SimpleConsumer
from zkconsumer.client import produce as raw_produce
from zkconsumer.mirror.bridge import Bridge, SourceSpec
from zkconsumer.mirror.config import MirrorConfig, Partitioning, TargetSpec
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_brokers, read_partition_names
from zkconsumer.zk.session import ZkSession

#: a tansu group member that leaves (or dies) is noticed within seconds
SOURCE_FAST = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}
BRIDGE_FAST = {"commit_interval_ms": 200, "retry_backoff_ms": 100,
               "retry_backoff_max_ms": 500, "flush_wait_ms": 2000}


def produce_modern(bootstrap: str, topic: str, records: Sequence[tuple[bytes | None, bytes]],
                   partitions: int, *, headers: Any = None) -> None:
    """Write ``(key, value)`` records, record ``i`` into partition ``i % partitions``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "enable.idempotence": True})
    for i, (key, value) in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, key, i % partitions, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0


def read_07(zk_connect: str, topic: str) -> dict[str, list[bytes]]:
    """``{"B-P": [payload, ...]}`` of every partition of ``topic`` in the 0.7 cluster."""
    out: dict[str, list[bytes]] = {}
    with ZkSession(zk_connect) as s:
        brokers = read_brokers(s)
        names = read_partition_names(s, topic)
    for name in names:
        b, p = (int(x) for x in name.split("-"))
        with SimpleConsumer(brokers[b].host, brokers[b].port) as c:
            out[name] = [m.value for m in c.iter_messages(topic, p, 0)]
    return out


def register_topic(brokers: Sequence[Any], topic: str, partitions: int) -> None:
    """Create a 0.7 topic the 0.7 way: an empty message set per partition creates the log
    and the broker registers the topic in ZooKeeper."""
    for broker in brokers:
        with BrokerConnection(broker.host, broker.port) as conn:
            for p in range(partitions):
                raw_produce(conn, topic, p, encode_message_set([]), confirm=True)


def start_bridge(bootstrap: str, zk_connect: str, topics: list[str], *,
                 group: str = "bridge", partitioning: str = "preserve",
                 topic_map: dict[str, str] | None = None,
                 target_options: dict[str, str] | None = None,
                 **settings: Any) -> MirrorThread:
    """A real `Bridge` running in a background thread (``.mirror`` is the bridge)."""
    config = MirrorConfig(target=TargetSpec.parse(f"kafka07://{zk_connect}"),
                          partitioning=Partitioning(partitioning), topic_map=topic_map or {},
                          target_options=target_options or {}, **{**BRIDGE_FAST, **settings})
    source = SourceSpec((bootstrap,), group, tuple(topics), options=SOURCE_FAST)
    return MirrorThread(Bridge(config, source)).start()
