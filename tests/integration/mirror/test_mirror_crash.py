"""The mirror as a real process: ``kill -9`` mid-run loses nothing; SIGTERM stops cleanly."""

from __future__ import annotations

import signal
import threading
from collections import Counter

from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, mirror_subprocess, produce

from zkconsumer.client import SimpleConsumer
from zkconsumer.zk.registry import read_brokers
from zkconsumer.zk.session import ZkSession

FAST = ["--set", "mirror.commit.interval.ms=50", "--set", "rebalance.backoff.ms=300",
        "--set", "rebalance.retries.max=30", "--set", "fetcher.backoff.ms=50",
        "--set", "zk.sessiontimeout.ms=2000", "--set", "mirror.max.in.flight=200",
        "--set", "mirror.poll.batch=50", "--set", "target.request.timeout.ms=2000",
        "--set", "target.message.timeout.ms=4000"]


def source_messages_below(zk_connect: str, topic: str, offsets: dict[str, int]) -> list[bytes]:
    """Every source payload of ``topic`` whose offset is below the partition's ``offsets``."""
    out: list[bytes] = []
    with ZkSession(zk_connect) as s:
        brokers = read_brokers(s)
    for name, until in offsets.items():
        b, p = (int(x) for x in name.split("-"))
        with SimpleConsumer(brokers[b].host, brokers[b].port) as c:
            out += [m.value for m in c.iter_messages(topic, p, 0) if m.offset < until]
    return out


def test_kill_9_mid_run_then_restart_loses_nothing(zk_connect, dev_broker, tansu,
                                                   tmp_path) -> None:
    dev_broker.many(2, num_partitions=2)
    create_topic(tansu.bootstrap, "orders", 4)
    produce(zk_connect, "orders", [f"warmup-{i}".encode() for i in range(100)])
    args = ["--zk", zk_connect, "--group", "mirror", "--topic", "orders", "--to", tansu.url,
            *FAST]

    # keep producing while the first mirror runs, so the kill lands mid-stream
    stop = threading.Event()
    produced: list[bytes] = [f"warmup-{i}".encode() for i in range(100)]

    def keep_producing() -> None:
        n = 0
        while not stop.is_set():
            batch = [f"live-{n + i:06d}".encode() * 4 for i in range(100)]
            produce(zk_connect, "orders", batch, chunk=25)
            produced.extend(batch)
            n += len(batch)
            stop.wait(0.02)

    feeder = threading.Thread(target=keep_producing, daemon=True)
    feeder.start()
    first = mirror_subprocess([*args, "--set", "consumerid=first"], tmp_path / "first.log")
    try:
        wait_until(lambda: sum(committed(zk_connect, "mirror", "orders").values())
                   > 20000, timeout=60, what="the first mirror committing some progress")
        first.send_signal(signal.SIGKILL)
        assert first.wait(10) == -signal.SIGKILL
    finally:
        stop.set()
        feeder.join(30)
        if first.poll() is None:
            first.kill()

    # The invariant kill -9 must never break: everything below a committed offset is in
    # the target already.
    at_kill = committed(zk_connect, "mirror", "orders")
    must_have = Counter(source_messages_below(zk_connect, "orders", at_kill))
    got = read_partitions(tansu.bootstrap, "orders", sum(must_have.values()))
    have = Counter(v for part in got.values() for _, v in part)
    assert not must_have - have, "committed offsets ran ahead of the target's acks"
    assert sum(must_have.values()) < len(produced)  # the kill really was mid-run

    ends = log_ends(zk_connect, "orders")
    second = mirror_subprocess([*args, "--set", "consumerid=second", "--metrics-port", "0",
                                "--progress", "--set", "mirror.progress.interval.ms=100"],
                               tmp_path / "second.log")
    try:
        wait_until(lambda: committed(zk_connect, "mirror", "orders") == ends, timeout=60,
                   what="the restarted mirror catching up")
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0, (tmp_path / "second.log").read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()
    log = (tmp_path / "second.log").read_text()
    assert "mirror stopped" in log and "/metrics and /healthz" in log
    assert " msg/s " in log and "in-flight" in log  # the --progress line
    assert "txn/s" in log and "exactly-once: transactions" in log

    got = read_partitions(tansu.bootstrap, "orders", len(produced))
    have = Counter(v for part in got.values() for _, v in part)
    assert not Counter(produced) - have, "messages lost across kill -9 and restart"
    # Replays start at the offsets committed at the kill: what lies below them is never
    # written twice (the committed prefix is exact).
    assert all(have[v] == 1 for v in must_have), "a committed message was mirrored twice"
