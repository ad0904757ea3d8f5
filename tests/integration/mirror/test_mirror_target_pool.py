"""KafkaTarget's producer pool against a real Kafka-protocol broker (tansu): several streams
merging into one target partition, each stream's order kept, every producer delivering; and
the at-least-once mirror with a pool through a target outage (every producer rebuilt)."""

from __future__ import annotations

from collections import Counter

from fixtures.outcomes import Outcomes
from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.mirror.targets import KafkaTarget

STREAMS = 6
RUNS = 20
PER_RUN = 50


def test_streams_keep_their_order_through_a_pool_into_one_partition(tansu) -> None:
    target = KafkaTarget([tansu.bootstrap], producers=3)
    try:
        target.create_topic("merged", 2, 1)
        target.open()
        total = STREAMS * RUNS * PER_RUN
        outcomes = Outcomes()
        # runs of the streams interleaved, as the engine sends them poll after poll; every
        # stream writes both target partitions
        for r in range(RUNS):
            for s in range(STREAMS):
                items = [(b"s%d-%06d" % (s, r * PER_RUN + i), i % 2, None)
                         for i in range(PER_RUN)]
                target.send_run("merged", items, outcomes, stream=("src", f"0-{s}"))
        assert target.flush(30)
        assert (outcomes.wait(STREAMS * RUNS, 30)
                and outcomes.results == [None] * (STREAMS * RUNS))
        assert all(target._pool.index(("src", f"0-{s}")) == s % 3 for s in range(STREAMS))
        got = read_partitions(tansu.bootstrap, "merged", total)
        assert sum(len(v) for v in got.values()) == total  # acks=all: each exactly once here
        for part, records in got.items():
            for s in range(STREAMS):
                mine = [v for _k, v in records if v.startswith(b"s%d-" % s)]
                assert mine == sorted(mine), f"stream {s} out of order in partition {part}"
                assert len(mine) == RUNS * PER_RUN // 2
    finally:
        target.close()


def test_a_pooled_mirror_survives_an_outage_in_partition_order(zk_connect, dev_broker, tansu,
                                                               start_mirror) -> None:
    # four source partitions on four producers, merging into two target partitions
    dev_broker(num_partitions=4)
    create_topic(tansu.bootstrap, "pooled", 2)
    before = [f"before-{i:04d}".encode() for i in range(400)]
    produce(zk_connect, "pooled", before, chunk=20)
    ends_before = log_ends(zk_connect, "pooled")
    mirror = start_mirror(tansu.url, topics=["pooled"], exactly_once=False, target_producers=4)
    wait_until(lambda: committed(zk_connect, "mirror", "pooled") == ends_before, timeout=30,
               what="the first batch mirrored and committed")
    target = mirror.mirror.target
    assert isinstance(target, KafkaTarget) and len(target.producers) == 4
    first_pool = target.producers  # held: ids of freed producers could be reused

    tansu.kill()
    during = [f"during-{i:04d}".encode() for i in range(400)]
    produce(zk_connect, "pooled", during, chunk=20)
    stats = mirror.mirror.stats
    wait_until(lambda: stats.retries >= 2, timeout=30, what="retry rounds during the outage")
    assert committed(zk_connect, "mirror", "pooled") == ends_before

    tansu.start()
    create_topic(tansu.bootstrap, "pooled", 2)
    ends = log_ends(zk_connect, "pooled")
    wait_until(lambda: committed(zk_connect, "mirror", "pooled") == ends, timeout=60,
               what="the mirror resuming after the outage")
    assert len(target.producers) == 4
    assert not any(new is old for new in target.producers for old in first_pool)
    del first_pool
    mirror.stop()

    got = read_partitions(tansu.bootstrap, "pooled", len(during))
    have = Counter(v for part in got.values() for _, v in part)
    assert not Counter(during) - have, "a message produced during the outage was lost"
    # each source partition's messages in source order within every target partition
    # (produce() sends chunks round-robin over the source partitions: a chunk is one
    # partition's consecutive run, so per chunk index modulo 4 the numbers only grow)
    for records in got.values():
        for source in range(4):
            seq = [int(v.split(b"-")[1]) for _, v in records if v.startswith(b"during-")
                   and int(v.split(b"-")[1]) // 20 % 4 == source]
            first_seen = list(dict.fromkeys(seq))
            assert first_seen == sorted(first_seen), f"source partition {source} reordered"
