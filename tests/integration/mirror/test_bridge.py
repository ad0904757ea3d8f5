"""The bridge, modern Kafka -> 0.7 (``mirror --from kafka://``): every record once in 0.7.

A real tansu source, real ZooKeeper and real 0.7 dev brokers.  One case per partitioning
mode, each with another target codec (plain, gzip, snappy): records are counted in 0.7
(each exactly once), routed as the mode promises, and the source offsets are committed.
"""

from __future__ import annotations

from collections import Counter

import pytest
from bridge_helpers import produce_modern, read_07, register_topic, start_bridge
from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from mirror_helpers import log_ends

from zkconsumer.protocol import default_partition

SOURCE_PARTITIONS = 3
N = 3000


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(SOURCE_PARTITIONS)],
                          timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


@pytest.mark.parametrize(("partitioning", "codec"), [
    ("preserve", "none"), ("hash", "gzip"), ("round-robin", "snappy"),
])
def test_bridge_writes_every_record_once(zk_connect, dev_broker, tansu, partitioning: str,
                                         codec: str) -> None:
    brokers = dev_broker.many(2, num_partitions=2)
    register_topic(brokers, "orders07", 2)
    wait_until(lambda: len(read_07(zk_connect, "orders07")) == 4, timeout=10,
               what="the 0.7 topic registered by both brokers")
    create_topic(tansu.bootstrap, "orders", SOURCE_PARTITIONS)
    records = [(f"k{i % 17}".encode(), f"{partitioning}-{i:06d}-".encode() * 4)
               for i in range(N)]
    produce_modern(tansu.bootstrap, "orders", records, SOURCE_PARTITIONS)

    bridge = start_bridge(tansu.bootstrap, zk_connect, ["orders"],
                          partitioning=partitioning, topic_map={"orders": "orders07"},
                          target_options={"compression.codec": codec})
    try:
        wait_until(lambda: sum(map(len, read_07(zk_connect, "orders07").values())) >= N,
                   timeout=60, what="every record in 0.7")
        wait_until(lambda: sum(_committed(tansu.bootstrap, "bridge", "orders").values()) == N,
                   timeout=30, what="the source offsets committed")
    finally:
        bridge.stop()
    got = read_07(zk_connect, "orders07")
    have = Counter(v for values in got.values() for v in values)
    assert have == Counter(v for _k, v in records)  # every record, exactly once
    names = sorted(got, key=lambda n: tuple(int(x) for x in n.split("-")))
    if partitioning == "preserve":  # source partition p -> 0.7 partition p % 4, in order
        for p in range(SOURCE_PARTITIONS):
            assert got[names[p]] == [v for i, (_k, v) in enumerate(records)
                                     if i % SOURCE_PARTITIONS == p]
    elif partitioning == "hash":  # the 0.7 producer's Java hashCode of the key
        for i, (key, value) in enumerate(records):
            assert value in got[names[default_partition(key, 4)]], i
    else:
        assert all(len(values) > N // 8 for values in got.values())  # spread over all four
    if codec != "none":  # compressed on the wire: far fewer log bytes than payload bytes
        assert sum(log_ends(zk_connect, "orders07").values()) < sum(len(v) for _k, v in records)
    assert bridge.mirror.stats.messages == N
