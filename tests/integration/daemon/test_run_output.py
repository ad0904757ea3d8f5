"""``zkconsumer run --output``: end to end, SIGTERM, kill -9 + restart, SIGHUP, two members.

Real ZooKeeper, real dev brokers, the daemon as a real subprocess.  "Nothing lost" is checked
by comparing every produced value with what the sink wrote; duplicates must come only from
what was written after the last commit.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from daemon_it_helpers import (
    DaemonProcess,
    committed,
    duplicates,
    log_ends,
    produce,
    read_jsonl,
    read_lines,
    values,
)
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.producer import Producer
from zkconsumer.protocol import default_partition


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v > 0}


def test_output_sink_end_to_end_and_sigterm(tmp_path: Path, dev_broker: Any, zk_connect: str,
                                            zk_client: KazooClient) -> None:
    brokers = dev_broker.many(2, num_partitions=2)
    vals = values("a", 400)
    produce(zk_connect, "ev", vals)
    out = tmp_path / "out.jsonl"
    d = DaemonProcess(tmp_path, zk_connect, "g", ["--topic", "ev", "--output", str(out),
                                                  "--format", "jsonl"])
    try:
        cid = d.consumer_id()
        wait_until(lambda: len(read_lines(out)) >= 400, what="400 messages written")
        records = read_jsonl(out)
        assert sorted(r["value"].encode() for r in records) == sorted(vals)  # no loss, no dup
        assert zk_client.get_children("/consumers/g/ids") == [cid]
        started = time.monotonic()
        assert d.stop(signal.SIGTERM) == 0, d.log
        assert time.monotonic() - started < 8.0
        # left the group at once (ids + owners gone) and committed every written offset
        assert zk_client.get_children("/consumers/g/ids") == []
        assert zk_client.get_children("/consumers/g/owners/ev") == []
        ends = _nonzero(log_ends(brokers, "ev"))
        assert _nonzero(committed(zk_client, "g", "ev")) == ends
        last = {}
        for r in records:
            last[r["partition"]] = max(last.get(r["partition"], 0), r["next_offset"])
        assert last == ends
    finally:
        d.close()


def test_kill_9_mid_run_then_restart_loses_nothing(tmp_path: Path, dev_broker: Any,
                                                   zk_connect: str,
                                                   zk_client: KazooClient) -> None:
    dev_broker.many(2, num_partitions=2)
    first = values("k", 1000)
    produce(zk_connect, "ev", first)
    out = tmp_path / "out.jsonl"
    # the killed member's owner znodes last until its session expires: keep that short
    args = ["--topic", "ev", "--output", str(out), "--format", "jsonl",
            "--set", "autocommit.interval.ms=100", "--batch-size", "50",
            "--set", "zk.sessiontimeout.ms=4000", "--set", "rebalance.backoff.ms=500"]
    more = values("k", 2000, start=1000)
    producer = threading.Thread(target=produce, args=(zk_connect, "ev", more, 20))
    d1 = DaemonProcess(tmp_path, zk_connect, "g", args, name="d1")
    try:
        wait_until(lambda: len(read_lines(out)) >= 500, what="first output")
        producer.start()  # keep producing while the daemon is killed
        wait_until(lambda: committed(zk_client, "g", "ev"), what="a commit")
        wait_until(lambda: len(read_lines(out)) >= 1200, what="output while producing")
        d1.kill()  # SIGKILL: no shutdown, no final commit
        before_restart = read_jsonl(out)
        offsets_at_kill = committed(zk_client, "g", "ev")
        d2 = DaemonProcess(tmp_path, zk_connect, "g", args, name="d2")
        try:
            d2.wait_stable(timeout=30)
            producer.join(60)
            expected = set(first + more)
            wait_until(lambda: {r["value"].encode() for r in read_jsonl(out)} >= expected,
                       timeout=30, what="every produced message written")
            assert d2.stop() == 0, d2.log
        finally:
            d2.close()
        records = read_jsonl(out)
        written = [r["value"].encode() for r in records]
        assert set(written) == expected
        # duplicates only of messages written after the last commit before the kill
        replayable = {r["value"].encode() for r in before_restart
                      if r["offset"] >= offsets_at_kill.get(r["partition"], 0)}
        dup_values = {v for v in written if written.count(v) > 1} if duplicates(written) else set()
        assert dup_values <= replayable
    finally:
        d1.close()
        if producer.is_alive():
            producer.join(60)


def test_sighup_reopens_output(tmp_path: Path, dev_broker: Any, zk_connect: str) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("old", 50))
    out = tmp_path / "out.txt"
    d = DaemonProcess(tmp_path, zk_connect, "g", ["--topic", "ev", "--output", str(out)])
    try:
        wait_until(lambda: len(read_lines(out)) == 50, what="first 50 lines")
        out.rename(tmp_path / "out.txt.1")
        d.send_signal(signal.SIGHUP)
        wait_until(lambda: out.exists(), what="reopened file")
        produce(zk_connect, "ev", values("new", 30))
        wait_until(lambda: len(read_lines(out)) == 30, what="new lines in the new file")
        assert read_lines(tmp_path / "out.txt.1") == values("old", 50)
        assert read_lines(out) == values("new", 30)
        assert d.stop() == 0, d.log
    finally:
        d.close()


def test_sigterm_hands_partitions_to_peer(tmp_path: Path, dev_broker: Any, zk_connect: str,
                                          zk_client: KazooClient) -> None:
    dev_broker(num_partitions=4)  # one broker: its first message registers all 4 partitions
    produce(zk_connect, "ev", values("x", 200))
    outs = [tmp_path / "a.txt", tmp_path / "b.txt"]
    args = [["--topic", "ev", "--output", str(o)] for o in outs]
    a = DaemonProcess(tmp_path, zk_connect, "g", args[0], name="a")
    b = DaemonProcess(tmp_path, zk_connect, "g", args[1], name="b")
    try:
        cid_a, cid_b = a.consumer_id(), b.consumer_id()

        def owners() -> dict[str, str]:
            base = "/consumers/g/owners/ev"
            return {p: zk_client.get(f"{base}/{p}")[0].decode()
                    for p in zk_client.get_children(base)} if zk_client.exists(base) else {}

        wait_until(lambda: len(owners()) == 4 and
                   {v.rsplit("-", 1)[0] for v in owners().values()} == {cid_a, cid_b},
                   timeout=20, what="both members own partitions")
        def consumed() -> set[bytes]:
            return set(read_lines(outs[0]) + read_lines(outs[1]))

        wait_until(lambda: consumed() >= set(values("x", 200)), what="all consumed")
        started = time.monotonic()
        assert a.stop() == 0, a.log
        assert zk_client.get_children("/consumers/g/ids") == [cid_b]
        wait_until(lambda: len(owners()) == 4 and
                   {v.rsplit("-", 1)[0] for v in owners().values()} == {cid_b},
                   timeout=15, what="peer owns everything")
        assert time.monotonic() - started < 15
        produce(zk_connect, "ev", values("y", 100))
        wait_until(lambda: set(values("y", 100)) <= set(read_lines(outs[1])),
                   what="peer consumes new messages")
        assert b.stop() == 0, b.log
        assert consumed() == set(values("x", 200) + values("y", 100))
    finally:
        a.close()
        b.close()


def test_oversized_message_stops_only_its_partition(tmp_path: Path, dev_broker: Any,
                                                    zk_connect: str) -> None:
    dev_broker(num_partitions=2)
    keys = {default_partition(k, 2): k for k in ("a", "b", "c", "d", "e")}
    with Producer(zk_connect=zk_connect) as producer:  # materialise both partitions
        producer.send("ev", [b"warm-up"], key=keys[0])
        wait_until(lambda: len(producer.partitions_for("ev")) == 2, what="2 partitions")
        producer.send("ev", [b"x" * 20000], key=keys[0])  # > max.fetch.size below
        producer.send("ev", values("ok", 20), key=keys[1])
    out = tmp_path / "out.txt"
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--output", str(out), "--set", "fetch.size=1024",
        "--set", "max.fetch.size=4096"])
    try:
        wait_until(lambda: set(values("ok", 20)) <= set(read_lines(out)),
                   what="the healthy partition consumed")
        wait_until(lambda: "partition stopped" in d.log, what="the parked partition reported")
        assert "max.fetch.size=4096" in d.log
        assert d.proc.poll() is None  # the daemon keeps running
        assert b"x" * 20000 not in read_lines(out)
        assert d.stop() == 0, d.log
    finally:
        d.close()


def test_full_disk_stops_the_daemon_without_committing(tmp_path: Path, dev_broker: Any,
                                                       zk_connect: str,
                                                       zk_client: KazooClient) -> None:
    # /dev/full fails every write with ENOSPC: the daemon must stop (exit 1, a supervisor
    # restarts it) and commit nothing -- never skip what it could not write.
    dev_broker.many(1, num_partitions=2)
    produce(zk_connect, "ev", values("f", 50))
    d = DaemonProcess(tmp_path, zk_connect, "g", ["--topic", "ev", "--output", "/dev/full",
                                                  "--set", "autocommit.interval.ms=100"])
    try:
        assert d.proc.wait(30) == 1, d.log
        assert "No space left on device" in d.log
        assert _nonzero(committed(zk_client, "g", "ev")) == {}
        assert zk_client.get_children("/consumers/g/ids") == []  # left the group
    finally:
        d.close()
