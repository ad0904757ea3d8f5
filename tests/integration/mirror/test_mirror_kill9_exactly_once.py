"""Exactly-once under ``kill -9``: two mirror processes in one group, killed at random moments
several times while the source grows; the target, read with ``isolation.level=read_committed``,
holds every source message exactly once, in source order per source partition.

One case per partitioning mode, each with another 0.7 codec (plain, gzip, snappy), so the
three modes and the three kinds of source sets are all covered in about a minute.
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path

import pytest
from fixtures.tansu import create_topic, read_records
from fixtures.waiting import wait_until
from mirror_helpers import MirrorProcesses, committed, log_ends, produce

from zkconsumer.producer.producer import Producer
from zkconsumer.protocol import Compression

FAST = ["--set", "mirror.commit.interval.ms=500", "--set", "rebalance.backoff.ms=300",
        "--set", "rebalance.retries.max=40", "--set", "fetcher.backoff.ms=50",
        "--set", "zk.sessiontimeout.ms=2000", "--set", "mirror.poll.batch=100",
        "--set", "mirror.transaction.interval.ms=100",
        "--set", "mirror.transaction.max.messages=5000",
        "--set", "target.message.timeout.ms=10000"]


@pytest.mark.slow
@pytest.mark.parametrize(("partitioning", "codec", "target_partitions"), [
    ("preserve", Compression.NONE, 4),
    ("hash", Compression.GZIP, 3),
    ("round-robin", Compression.SNAPPY, 3),
], ids=["preserve-plain", "hash-gzip", "round-robin-snappy"])
def test_kill_9_at_random_moments_leaves_every_message_exactly_once(
        zk_connect, dev_broker, tansu, tmp_path: Path, partitioning: str, codec: Compression,
        target_partitions: int) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    dev_broker.many(2, num_partitions=2)
    create_topic(tansu.bootstrap, "events", target_partitions)
    produced: list[bytes] = []
    first = [f"{partitioning}-{i:06d}".encode() * 3 for i in range(3000)]
    produce(zk_connect, "events", first, chunk=20, codec=codec)
    produced += first

    stop = threading.Event()

    def keep_producing() -> None:  # a steady flow, so every kill lands mid-stream
        n = len(produced)
        with Producer(zk_connect=zk_connect, compression_codec=codec, confirm=True,
                      partitioner="round-robin") as producer:
            while not stop.is_set():
                batch = [f"{partitioning}-{n + i:06d}".encode() * 3 for i in range(20)]
                producer.send("events", batch)
                produced.extend(batch)
                n += len(batch)

    args = ["--zk", zk_connect, "--group", "eos", "--topic", "events", "--to", tansu.url,
            "--partitioning", partitioning, *FAST]
    mirrors = MirrorProcesses(args, tmp_path)
    feeder = threading.Thread(target=keep_producing, daemon=True)
    feeder.start()
    try:
        mirrors.launch("a")
        mirrors.launch("b")
        wait_until(lambda: sum(committed(zk_connect, "eos", "events").values()) > 0,
                   timeout=60, what="the mirrors committing something")
        mirrors.kill_at_random(rng, 4, (0.3, 2.0))
        stop.set()
        feeder.join(30)
        ends = log_ends(zk_connect, "events")
        wait_until(lambda: committed(zk_connect, "eos", "events") == ends, timeout=90,
                   what=f"the mirrors catching up (seed {seed})")
        mirrors.stop(30)
    finally:
        stop.set()
        mirrors.kill_all()

    got = read_records(tansu.bootstrap, "events", len(produced), timeout=60)
    have = Counter(r.value for part in got.values() for r in part)
    missing = Counter(produced) - have
    duplicated = {v: c for v, c in have.items() if c > 1}
    assert not missing, f"seed {seed}: {sum(missing.values())} missing"
    assert not duplicated, f"seed {seed}: {len(duplicated)} duplicated, e.g. {list(duplicated)[:3]}"
    assert sum(have.values()) == len(produced)
    if partitioning != "round-robin":  # round-robin promises no order
        for part in got.values():
            seqs: dict[bytes, list[tuple[int, int]]] = {}
            for r in part:
                seqs.setdefault(r.header("zkc.source") or b"", []).append(
                    (int(r.header("zkc.offset") or b"0"), int(r.header("zkc.index") or b"0")))
            for source, seq in seqs.items():
                assert seq == sorted(seq), f"seed {seed}: {source!r} out of source order"
