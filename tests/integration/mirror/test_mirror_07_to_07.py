"""0.7 -> 0.7 mirroring (the old MirrorMaker job) between two dev clusters.

Both clusters live on the one test ZooKeeper server, in two chroots.  The target is written by
zkconsumer's own producer in confirmed mode.
"""

from __future__ import annotations

from collections import Counter

from bridge_helpers import read_07, register_topic
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.protocol import Compression


def test_mirror_between_two_07_clusters_preserves_partitions(
        zk_connect, zk_connect_target, dev_broker, start_mirror) -> None:
    dev_broker.many(2, num_partitions=2)  # source: 0-0 0-1 1-0 1-1
    targets = [dev_broker(broker_id=5, zk=zk_connect_target, num_partitions=2),
               dev_broker(broker_id=7, zk=zk_connect_target, num_partitions=2)]
    register_topic(targets, "feed", 2)
    wait_until(lambda: len(read_07(zk_connect_target, "feed")) == 4, timeout=10,
               what="target topic registered by both target brokers")

    plain = [f"plain-{i}".encode() for i in range(200)]
    gz = [f"gzip-{i}".encode() * 3 for i in range(200)]
    produce(zk_connect, "feed", plain, chunk=25)
    produce(zk_connect, "feed", gz, chunk=25, codec=Compression.GZIP)
    ends = log_ends(zk_connect, "feed")

    mirror = start_mirror(f"kafka07://{zk_connect_target}", topics=["feed"],
                          topic_map={"feed": "feed"},
                          target_options={"compression.codec": "snappy"})
    wait_until(lambda: committed(zk_connect, "mirror", "feed") == ends, timeout=30,
               what="everything mirrored to the 0.7 target")
    mirror.stop()

    source = read_07(zk_connect, "feed")
    target = read_07(zk_connect_target, "feed")
    # preserve: source 0-0, 0-1, 1-0, 1-1 -> target index 0..3 = 5-0, 5-1, 7-0, 7-1, in order
    for src, dst in zip(["0-0", "0-1", "1-0", "1-1"], ["5-0", "5-1", "7-0", "7-1"],
                        strict=True):
        assert target[dst] == source[src]
    assert Counter(v for vs in target.values() for v in vs) == Counter(plain + gz)


def test_07_target_hash_with_key_regex_routes_like_a_scala_producer(
        zk_connect, zk_connect_target, dev_broker, start_mirror) -> None:
    from zkconsumer.protocol import default_partition

    dev_broker(num_partitions=1)
    targets = [dev_broker(broker_id=3, zk=zk_connect_target, num_partitions=3)]
    register_topic(targets, "keyed", 3)
    payloads = [f"k{i % 5}:v{i}".encode() for i in range(100)]
    produce(zk_connect, "keyed", payloads, chunk=10)
    ends = log_ends(zk_connect, "keyed")
    mirror = start_mirror(f"kafka07://{zk_connect_target}", topics=["keyed"],
                          partitioning="hash", key_regex=r"^(k\d):")
    wait_until(lambda: committed(zk_connect, "mirror", "keyed") == ends, timeout=30,
               what="keyed messages mirrored")
    mirror.stop()
    target = read_07(zk_connect_target, "keyed")
    for name, values in target.items():
        for v in values:
            key = v.split(b":")[0].decode()
            assert name == f"3-{default_partition(key, 3)}"  # Java String.hashCode routing
    assert Counter(v for vs in target.values() for v in vs) == Counter(payloads)


def test_one_parked_source_partition_does_not_stop_the_mirror(
        zk_connect, zk_connect_target, zk_client, dev_broker, start_mirror) -> None:
    # An unreadable committed offset parks its partition (issue 11): the mirror reports it
    # and mirrors every other partition, as zkconsumer run does, instead of ending the run.
    dev_broker(num_partitions=2)  # source: 0-0 0-1
    targets = [dev_broker(broker_id=5, zk=zk_connect_target, num_partitions=2)]
    register_topic(targets, "feed", 2)
    wait_until(lambda: len(read_07(zk_connect_target, "feed")) == 2, timeout=10,
               what="target topic registered")
    produce(zk_connect, "feed", [f"m-{i}".encode() for i in range(100)], chunk=10)
    ends = log_ends(zk_connect, "feed")
    zk_client.create("/consumers/mirror/offsets/feed/0-0", b"abc", makepath=True)
    mirror = start_mirror(f"kafka07://{zk_connect_target}", topics=["feed"])
    wait_until(lambda: zk_client.exists("/consumers/mirror/offsets/feed/0-1") and int(
        zk_client.get("/consumers/mirror/offsets/feed/0-1")[0]) == ends["0-1"],
               timeout=30, what="the healthy partition mirrored")
    wait_until(lambda: mirror.mirror.stats.partition_errors >= 1, what="the parked one reported")
    assert mirror.alive, mirror.error
    source = read_07(zk_connect, "feed")
    assert read_07(zk_connect_target, "feed")["5-1"] == source["0-1"]
    mirror.stop()
