"""The bridge under ``kill -9``: two bridge processes in one group, killed at random moments
several times while the source grows; 0.7 then holds every source record exactly once (the
bridge is the only writer of its 0.7 partitions), in source order per source partition for
``preserve``.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from bridge_helpers import read_07, register_topic
from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from mirror_helpers import MirrorProcesses

SOURCE_PARTITIONS = 4
FAST = ["--set", "mirror.commit.interval.ms=300", "--set", "mirror.poll.batch=300",
        "--set", "mirror.bridge.flush.wait.ms=2000", "--set", "mirror.retry.backoff.ms=100",
        "--set", "target.zk.sessiontimeout.ms=2000",
        "--set", "source.session.timeout.ms=6000", "--set", "source.heartbeat.interval.ms=500"]


@pytest.mark.slow
@pytest.mark.parametrize("partitioning", ["preserve", "hash"])
def test_kill_9_of_the_bridge_leaves_every_record_once_in_07(
        zk_connect, dev_broker, tansu, tmp_path: Path, partitioning: str) -> None:
    from confluent_kafka import Producer

    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    brokers = dev_broker.many(2, num_partitions=2)
    register_topic(brokers, "events07", 2)
    wait_until(lambda: len(read_07(zk_connect, "events07")) == 4, timeout=10,
               what="the 0.7 topic registered")
    create_topic(tansu.bootstrap, "events", SOURCE_PARTITIONS)

    produced: list[bytes] = []
    ends: dict[int, int] = {}
    stop = threading.Event()

    def keep_producing() -> None:  # a steady flow, so every kill lands mid-stream
        producer = Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5,
                             "enable.idempotence": True})

        def delivered(err, msg) -> None:  # confluent-kafka delivery callback
            assert err is None, err
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

        i = 0
        while not stop.is_set():
            for _ in range(50):
                value = f"{partitioning}-{i:07d}".encode() * 3
                producer.produce("events", value, f"key-{i % 31}".encode(),
                                 i % SOURCE_PARTITIONS, on_delivery=delivered)
                produced.append(value)
                i += 1
            producer.poll(0)
            time.sleep(0.01)  # the feeder's pace (about 5,000 records/s), not a wait
        assert producer.flush(30) == 0

    args = ["--from", tansu.url, "--group", "bridge", "--topic", "events",
            "--to", f"kafka07://{zk_connect}", "--topic-map", "events:events07",
            "--partitioning", partitioning, *FAST]
    bridges = MirrorProcesses(args, tmp_path)

    def in_07() -> int:
        return sum(map(len, read_07(zk_connect, "events07").values()))

    feeder = threading.Thread(target=keep_producing, daemon=True)
    feeder.start()
    try:
        bridges.launch("a")
        bridges.launch("b")
        wait_until(lambda: in_07() > 0, timeout=60, what="the bridges writing something")
        bridges.kill_at_random(rng, 4, (0.5, 3.0))
        stop.set()
        feeder.join(60)
        wait_until(lambda: in_07() >= len(produced), timeout=180,
                   what=f"the bridges catching up (seed {seed})")
        bridges.stop(60)
    finally:
        stop.set()
        bridges.kill_all()

    got = read_07(zk_connect, "events07")
    have = Counter(v for values in got.values() for v in values)
    missing = Counter(produced) - have
    duplicated = {v: c for v, c in have.items() if c > 1}
    assert not missing, f"seed {seed}: {sum(missing.values())} missing"
    assert not duplicated, f"seed {seed}: {len(duplicated)} duplicated, e.g. {list(duplicated)[:3]}"
    assert sum(have.values()) == len(produced)
    if partitioning == "preserve":  # one source partition per 0.7 partition, in order
        order = {v: i for i, v in enumerate(produced)}
        for values in got.values():
            assert [order[v] for v in values] == sorted(order[v] for v in values), seed
