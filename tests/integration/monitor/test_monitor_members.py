"""Every status from real ``zkconsumer run`` members (subprocesses) on dev brokers and the test
ZooKeeper: OK (a healthy member), WARN (a handler slower than the producer), STALL (a member
SIGSTOPped with lag), STOP (every member gone), REWIND (``offsets reset`` backwards), ERR
(a kill -9 past the session timeout leaving partitions unowned while a member exists).

The monitor polls every 0.3 s with a 4-sample window, and each test WAITS for the status it
asserts; the waits are bounded by what the members do (session timeouts, commits)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until
from monitor_helpers import REPO, running_monitor

sys.path.insert(0, str(REPO / "tests" / "integration" / "daemon"))
from daemon_it_helpers import (
    DaemonProcess,
    committed,
    env_with_repo,
    log_ends,
    produce,
    values,
)

pytestmark = pytest.mark.slow

FAST = ["--set", "autocommit.interval.ms=100", "--set", "rebalance.backoff.ms=200"]
SLOW_HANDLER = """
import time

def handle(batch):
    time.sleep(0.05 * len(batch))  # the slow consumer under test: 20 messages a second
"""


@pytest.fixture
def members(tmp_path: Path) -> Iterator[list[DaemonProcess]]:
    started: list[DaemonProcess] = []
    yield started
    for d in started:
        if d.proc.poll() is None:
            d.proc.send_signal(signal.SIGCONT)
        d.close()


def _member(members: list[DaemonProcess], tmp_path: Path, zk: str, name: str, *args: str,
            session_ms: int = 6000, env: dict[str, str] | None = None) -> DaemonProcess:
    d = DaemonProcess(tmp_path, zk, "g", ["--topic", "ev", *FAST, "--set",
                                          f"zk.sessiontimeout.ms={session_ms}", *args],
                      name=name, env=env, cwd=tmp_path)
    members.append(d)
    d.wait_stable()
    return d


def _caught_up(zk_client: Any, brokers: list[Any]) -> bool:
    ends = {k: v for k, v in log_ends(brokers, "ev").items() if v}
    got = committed(zk_client, "g", "ev")
    return all(got.get(k) == v for k, v in ends.items())


def test_ok_stall_and_stop(tmp_path: Path, dev_broker: Any, zk_connect: str, zk_client: Any,
                           members: list[DaemonProcess]) -> None:
    brokers = dev_broker.many(1, num_partitions=2)
    produce(zk_connect, "ev", values("a", 100))
    d = _member(members, tmp_path, zk_connect, "m1", "--output", str(tmp_path / "out"),
                session_ms=60000)
    with running_monitor(zk_connect) as mon:
        wait_until(lambda: _caught_up(zk_client, brokers), timeout=30, what="member caught up")
        g = mon.wait_status("g", "OK")
        assert len(g["members"]) == 1 and g["total_lag"] == 0
        assert {p["owner"] for p in g["partitions"]} == {d.consumer_id() + "-0"}

        # STALL: frozen (its session outlives the test step), owning partitions with lag
        d.send_signal(signal.SIGSTOP)
        produce(zk_connect, "ev", values("b", 50))
        g = mon.wait_status("g", "STALL")
        stalled = [p for p in g["partitions"] if p["status"] == "STALL"]
        assert stalled and all(p["lag"] > 0 and p["owner"] for p in stalled)

        # STOP: the member leaves for good (its owners and registration go), lag remains
        d.send_signal(signal.SIGCONT)
        wait_until(lambda: _caught_up(zk_client, brokers), timeout=30, what="caught up again")
        assert d.stop() == 0, d.log
        produce(zk_connect, "ev", values("c", 50))
        g = mon.wait_status("g", "STOP")
        assert g["members"] == [] and g["total_lag"] > 0
        assert {p["status"] for p in g["partitions"] if p["lag"]} == {"STOP"}


def test_warn_when_the_handler_is_slower_than_the_producer(
        tmp_path: Path, dev_broker: Any, zk_connect: str, members: list[DaemonProcess]) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("w", 1))
    (tmp_path / "slow_handler.py").write_text(SLOW_HANDLER)
    _member(members, tmp_path, zk_connect, "slow", "--handler", "slow_handler:handle",
            "--batch-size", "1", env=env_with_repo(PYTHONPATH=os.pathsep.join(
                [str(REPO), str(tmp_path)])))
    stop = threading.Event()

    def producer() -> None:  # ~10 times what the handler manages
        i = 0
        while not stop.is_set():
            produce(zk_connect, "ev", values("p", 20, start=i))
            i += 20
            stop.wait(0.1)

    t = threading.Thread(target=producer, daemon=True)
    with running_monitor(zk_connect) as mon:
        t.start()
        try:
            g = mon.wait_status("g", "WARN", timeout=60)
        finally:
            stop.set()
            t.join(30)
        (p,) = g["partitions"]
        assert p["status"] == "WARN" and "slower than the producer" in p["reason"]
        assert p["lag"] > 0 and p["owner"]


def test_rewind_after_offsets_reset_backwards(tmp_path: Path, dev_broker: Any, zk_connect: str,
                                              zk_client: Any,
                                              members: list[DaemonProcess]) -> None:
    brokers = dev_broker.many(1, num_partitions=1)
    produce(zk_connect, "ev", values("r", 200))
    d = _member(members, tmp_path, zk_connect, "m1", "--output", str(tmp_path / "out"))
    with running_monitor(zk_connect) as mon:
        wait_until(lambda: _caught_up(zk_client, brokers), timeout=30, what="caught up")
        mon.wait_status("g", "OK")
        assert d.stop() == 0, d.log
        reset = subprocess.run(
            [sys.executable, "-m", "zkconsumer", "offsets", "reset", "--zk", zk_connect,
             "--group", "g", "--topic", "ev", "--to", "earliest"],
            capture_output=True, text=True, timeout=60, cwd=str(REPO), env=env_with_repo())
        assert reset.returncode == 0, reset.stderr
        g = mon.wait_status("g", "REWIND")
        (p,) = g["partitions"]
        assert p["offset"] == 0 and "went back" in p["reason"]


def test_err_when_a_killed_members_partitions_stay_unowned(
        tmp_path: Path, dev_broker: Any, zk_connect: str, zk_client: Any,
        members: list[DaemonProcess]) -> None:
    brokers = dev_broker.many(1, num_partitions=2)
    produce(zk_connect, "ev", values("e", 100))
    a = _member(members, tmp_path, zk_connect, "a", "--output", str(tmp_path / "a"),
                session_ms=60000)
    b = _member(members, tmp_path, zk_connect, "b", "--output", str(tmp_path / "b"),
                session_ms=3000)
    owners = "/consumers/g/owners/ev"
    wait_until(lambda: {zk_client.get(f"{owners}/{p}")[0].decode().rsplit("-", 1)[0]
                        for p in zk_client.get_children(owners)}
               == {a.consumer_id(), b.consumer_id()}, timeout=30, what="both members own")
    wait_until(lambda: _caught_up(zk_client, brokers), timeout=30, what="caught up")
    with running_monitor(zk_connect) as mon:
        mon.wait_status("g", "OK")
        a.send_signal(signal.SIGSTOP)  # alive for ZooKeeper, but cannot rebalance
        b.kill()                       # kill -9: its session expires after 3 s
        g = mon.wait_status("g", "ERR", timeout=30)
        assert [m["consumer_id"] for m in g["members"]] == [a.consumer_id()]
        unowned = [p for p in g["partitions"] if p["owner"] is None]
        assert len(unowned) == 1 and unowned[0]["status"] == "ERR"
        assert "has no owner" in unowned[0]["reason"]
