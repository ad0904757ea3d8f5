"""0.7 dev brokers + real ZooKeeper -> mirror -> tansu: every message, exactly as produced."""

from __future__ import annotations

from collections import Counter

import pytest
from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.errors import TargetError
from zkconsumer.mirror.routing import murmur2_partition
from zkconsumer.protocol import Compression


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.SNAPPY],
                         ids=["none", "gzip", "snappy"])
def test_every_message_arrives_in_partition_order(zk_connect, dev_broker, tansu, start_mirror,
                                                  codec) -> None:
    dev_broker.many(2, num_partitions=2)
    payloads = [f"{codec.name}-{i:05d}".encode() * (1 + i % 3) for i in range(600)]
    produce(zk_connect, "events", payloads, codec=codec, chunk=40)
    ends = log_ends(zk_connect, "events")
    create_topic(tansu.bootstrap, "events", 4)

    mirror = start_mirror(tansu.url, topics=["events"])
    wait_until(lambda: committed(zk_connect, "mirror", "events") == ends, timeout=30,
               what="all source offsets committed")
    mirror.stop()

    got = read_partitions(tansu.bootstrap, "events", len(payloads))
    assert Counter(v for part in got.values() for _, v in part) == Counter(payloads)
    # preserve: the 4 source partitions 0-0, 0-1, 1-0, 1-1 map 1:1 onto target 0..3, and
    # each target partition holds its source partition's messages in source order.
    from zkconsumer.client import SimpleConsumer
    from zkconsumer.zk.registry import read_brokers
    from zkconsumer.zk.session import ZkSession

    with ZkSession(zk_connect) as s:
        brokers = read_brokers(s)
    for i, (b, p) in enumerate([(0, 0), (0, 1), (1, 0), (1, 1)]):
        with SimpleConsumer(brokers[b].host, brokers[b].port) as c:
            source = [m.value for m in c.iter_messages("events", p, 0)]
        assert [v for _, v in got[i]] == source
    assert mirror.mirror.stats.messages == len(payloads)


def test_topic_map_hash_key_regex_and_topic_creation(zk_connect, dev_broker, tansu,
                                                     start_mirror) -> None:
    dev_broker(num_partitions=3)
    payloads = [f"user={i % 7} seq={i}".encode() for i in range(200)]
    produce(zk_connect, "clicks", payloads, chunk=10)
    ends = log_ends(zk_connect, "clicks")

    mirror = start_mirror(tansu.url, topics=["clicks"], topic_map={"clicks": "clicks.v2"},
                          partitioning="hash", key_regex=r"user=(\d+)",
                          create_topics=True, partitions=5)
    wait_until(lambda: committed(zk_connect, "mirror", "clicks") == ends, timeout=30,
               what="all source offsets committed")
    mirror.stop()

    got = read_partitions(tansu.bootstrap, "clicks.v2", len(payloads))
    assert len(got) == 5  # created with --partitions 5
    seen = Counter()
    for partition, records in got.items():
        for key, value in records:
            assert key == value.split()[0].split(b"=")[1]
            # librdkafka's murmur2_random placed it where the Java client's murmur2 would
            assert partition == murmur2_partition(key, 5)
            seen[value] += 1
    assert seen == Counter(payloads)


def test_missing_target_topic_without_create_topics_stops_without_committing(
        zk_connect, dev_broker, tansu, start_mirror) -> None:
    dev_broker()
    produce(zk_connect, "orphans", [b"a", b"b"])
    mirror = start_mirror(tansu.url, topics=["orphans"])
    wait_until(lambda: not mirror.alive, timeout=30, what="mirror stops on a missing topic")
    assert isinstance(mirror.error, TargetError)
    assert "does not exist" in str(mirror.error)
    assert committed(zk_connect, "mirror", "orphans") in ({}, {"0-0": 0})
    mirror.error = None  # seen; let the fixture's stop() pass
