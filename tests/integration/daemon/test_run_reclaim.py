"""Issue 11, Defect 1: a partition released and claimed back by the same member loses nothing.

Both repros of the issue, with real processes: (A) a lone member whose ZooKeeper session
expires (SIGSTOP past the session timeout, then SIGCONT) gets all its partitions back a few
milliseconds after releasing them; (B) a member with two streams keeps some of its partitions
across a peer's join and leave, and gets others back.  While a producer writes, every
produced message must end up in the output, and every duplicate must be a replay of what was
written after the last commit.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from daemon_it_helpers import DaemonProcess, committed, produce, read_jsonl, values
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

ARGS = ["--format", "jsonl", "--batch-size", "200",
        "--set", "autocommit.interval.ms=200", "--set", "zk.sessiontimeout.ms=3000",
        "--set", "rebalance.backoff.ms=300"]


def _written(out: Path) -> list[bytes]:
    return [r["value"].encode() for r in read_jsonl(out)]


def _wait_all(out: Path, expected: set[bytes], what: str) -> None:
    def missing() -> bool:
        return not (expected - set(_written(out)))
    wait_until(missing, timeout=60, what=what)


def test_lone_member_session_expiry_loses_nothing(tmp_path: Path, dev_broker: Any,
                                                  zk_connect: str,
                                                  zk_client: KazooClient) -> None:
    dev_broker.many(2, num_partitions=2)
    produce(zk_connect, "ev", values("s", 500))
    out = tmp_path / "out.jsonl"
    d = DaemonProcess(tmp_path, zk_connect, "g", ["--topic", "ev", "--output", str(out),
                                                  *ARGS])
    more = values("s", 3000, start=500)
    producer = threading.Thread(target=produce, args=(zk_connect, "ev", more, 10))
    try:
        d.wait_stable()
        wait_until(lambda: len(_written(out)) >= 500, what="first output")
        producer.start()
        for cycle in range(1, 3):
            d.send_signal(signal.SIGSTOP)
            # the session expires on the server while the member is frozen
            wait_until(lambda: not zk_client.get_children("/consumers/g/ids"), timeout=20,
                       what="the frozen member's session expired")
            d.send_signal(signal.SIGCONT)
            wait_until(lambda n=cycle: d.log.count("ZooKeeper session expired") >= n,  # type: ignore[misc]
                       timeout=30, what=f"expiry {cycle} noticed")
            wait_until(lambda n=cycle: d.log.count("consumer state STABLE") >= n + 1,  # type: ignore[misc]
                       timeout=30, what=f"rebalanced after expiry {cycle}")
        producer.join(60)
        _wait_all(out, set(values("s", 3500)), "every produced message written")
        wait_until(lambda: sum(committed(zk_client, "g", "ev").values()) > 0, what="commits")
        assert d.stop() == 0, d.log
    finally:
        d.send_signal(signal.SIGCONT)
        d.close()
        if producer.is_alive():
            producer.join(60)
    written = _written(out)
    assert set(written) == set(values("s", 3500))


def test_two_streams_member_across_peer_join_and_leave_loses_nothing(
        tmp_path: Path, dev_broker: Any, zk_connect: str, zk_client: KazooClient) -> None:
    dev_broker.many(2, num_partitions=3)
    produce(zk_connect, "ev", values("j", 300))
    out_a = tmp_path / "a.jsonl"
    out_b = tmp_path / "b.jsonl"
    a = DaemonProcess(tmp_path, zk_connect, "g", ["--topic", "ev:2", "--output", str(out_a),
                                                  *ARGS], name="a")
    more = values("j", 3000, start=300)
    producer = threading.Thread(target=produce, args=(zk_connect, "ev", more, 10))
    try:
        a.wait_stable()
        producer.start()
        for cycle in range(3):
            b = DaemonProcess(tmp_path, zk_connect, "g",
                              ["--topic", "ev", "--output", str(out_b), *ARGS],
                              name=f"b{cycle}")
            try:
                b.wait_stable()
                wait_until(lambda: len(zk_client.get_children("/consumers/g/ids")) == 2,
                           what="b joined")
                assert b.stop(signal.SIGTERM) == 0, b.log
            finally:
                b.close()
            wait_until(lambda: len(zk_client.get_children("/consumers/g/owners/ev")) == 6,
                       timeout=30, what="a owns every partition again")
        producer.join(60)
        expected = set(values("j", 3300))
        wait_until(lambda: not (expected - set(_written(out_a)) - set(_written(out_b))),
                   timeout=60, what="every produced message written by a or b")
        assert a.stop() == 0, a.log
    finally:
        a.close()
        if producer.is_alive():
            producer.join(60)
    assert set(_written(out_a)) | set(_written(out_b)) == set(values("j", 3300))
