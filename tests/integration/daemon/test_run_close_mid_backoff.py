"""SIGTERM while the member's rebalance backs off: ``zkconsumer run`` leaves at once (issue 18).

Found as a new user would: with the owners of a kill -9'd member not yet expired, a SIGTERM
waited for the remaining rebalance attempts (4.1 s from SIGTERM to "stopping") and a new
rebalance even started after "stopping".  Real ZooKeeper, real dev brokers, a real daemon
process; the killed member is a live `ZkSession` holding its registration and owner znodes.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon_it_helpers import DaemonProcess, produce, values
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.zk.session import ZkSession

GROUP = "g"
ME = f"{GROUP}_m"
DEAD = f"{GROUP}_x"  # sorts after us: while alone with it, we get the first half
JOINER = f"{GROUP}_a"  # sorts before us: when it joins, our range moves onto DEAD's half


def test_sigterm_mid_backoff_leaves_the_group_within_a_second(
        tmp_path: Path, dev_broker: Any, zk_connect: str, zk_client: KazooClient,
        zk_session_factory: Callable[..., ZkSession]) -> None:
    dev_broker.many(2, num_partitions=4)
    produce(zk_connect, "ev", values("s", 40), chunk=1)
    wait_until(lambda: len(zk_client.get_children("/brokers/topics/ev")) == 2,
               what="the topic on both brokers")
    dead = zk_session_factory()
    assert dead.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/ids/{DEAD}",
                                                 b'{ "ev": 1 }')
    d = DaemonProcess(tmp_path, zk_connect, GROUP, [
        "--topic", "ev", "--output", str(tmp_path / "out.jsonl"), "--format", "jsonl",
        "--set", "consumerid=m", "--set", "rebalance.backoff.ms=5000",
        "--set", "rebalance.retries.max=4"])
    try:
        d.wait_stable()
        wait_until(lambda: len(zk_client.get_children(f"/consumers/{GROUP}/owners/ev")) == 4,
                   what="our half claimed")
        for name in ("1-0", "1-1", "1-2", "1-3"):  # DEAD claimed its half, then kill -9
            assert dead.create_ephemeral_expect_conflict(
                f"/consumers/{GROUP}/owners/ev/{name}", f"{DEAD}-0".encode())
        joiner = zk_session_factory()
        assert joiner.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/ids/{JOINER}",
                                                       b'{ "ev": 1 }')
        wait_until(lambda: "partitions still owned by others" in d.log, timeout=10,
                   what="our rebalance backing off on the dead member's owners")
        started = time.monotonic()
        d.send_signal(signal.SIGTERM)
        wait_until(lambda: not zk_client.exists(f"/consumers/{GROUP}/ids/{ME}"), timeout=10,
                   interval=0.01, what="our ids znode gone")
        left = time.monotonic() - started
        assert d.proc.wait(10) == 0, d.log
    finally:
        if d.proc.poll() is None:
            d.kill()
    assert left < 1.0, (left, d.log)
    log = d.log
    after = log[log.index("SIGTERM received"):]
    assert "-> REBALANCING" not in after, after  # no rebalance starts after the stop
    assert "consumer state CLOSED" in after
