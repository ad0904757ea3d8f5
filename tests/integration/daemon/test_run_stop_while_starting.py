"""SIGTERM while ``zkconsumer run`` is still starting: it leaves at once (issue 18).

The most common case after a crash-restart: the member that was ``kill -9``'d still holds the
group's owner znodes (its session lives until ``zk.sessiontimeout.ms``), so the *first*
rebalance of the new process backs off.  A SIGTERM then used to wait for the rest of that
rebalance (``rebalance.retries.max`` x ``rebalance.backoff.ms``), and the start-up retry loop
could even start another member after the stop.  Now a stop closes the starting member at
once: its registration vanishes within a second, the process exits 0, no new member starts.

Real ZooKeeper, real dev broker, a real daemon process; the killed member is a live
`ZkSession` holding its registration and owner znodes (never closed: as after kill -9).
The same for a stop during a ZooKeeper connection attempt at start-up.
"""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon_it_helpers import DaemonProcess, produce, values
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.zk.session import ZkSession

GROUP = "g"
ME = f"{GROUP}_m"
DEAD = f"{GROUP}_a"  # sorts before us: the range assignment gives it partition 0, us 1


def _sigterm(d: DaemonProcess, gone: Callable[[], object]) -> tuple[float, float, str]:
    """SIGTERM ``d``: seconds until ``gone()`` holds and until it exited 0; its log after."""
    started = time.monotonic()
    d.send_signal(signal.SIGTERM)
    wait_until(gone, timeout=10, interval=0.01, what="the member gone after SIGTERM")
    left = time.monotonic() - started
    code = d.proc.wait(10)
    exited = time.monotonic() - started
    log = d.log
    assert code == 0, log
    return left, exited, log[log.index("SIGTERM received"):]


def test_sigterm_during_the_first_rebalance_leaves_at_once_and_starts_nothing(
        tmp_path: Path, dev_broker: Any, zk_connect: str, zk_client: KazooClient,
        zk_session_factory: Callable[..., ZkSession]) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "ev", values("s", 10), chunk=1)
    wait_until(lambda: zk_client.exists("/brokers/topics/ev"), what="the topic registered")
    dead = zk_session_factory()  # kill -9'd: registration and owners live on with its session
    assert dead.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/ids/{DEAD}",
                                                 b'{ "ev": 1 }')
    for name in ("0-0", "0-1"):
        assert dead.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/owners/ev/{name}",
                                                     f"{DEAD}-0".encode())
    d = DaemonProcess(tmp_path, zk_connect, GROUP, [
        "--topic", "ev", "--output", str(tmp_path / "out.jsonl"), "--format", "jsonl",
        "--set", "consumerid=m", "--set", "rebalance.backoff.ms=5000",
        "--set", "rebalance.retries.max=4"])
    try:
        wait_until(lambda: "partitions still owned by others" in d.log
                   or d.proc.poll() is not None, timeout=30,
                   what="the first rebalance backing off on the dead member's owners")
        assert d.proc.poll() is None, d.log
        assert zk_client.exists(f"/consumers/{GROUP}/ids/{ME}")
        assert "consumer state STABLE" not in d.log  # still inside start()
        left, exited, after = _sigterm(
            d, lambda: not zk_client.exists(f"/consumers/{GROUP}/ids/{ME}"))
    finally:
        d.close()
    print(f"SIGTERM -> ids znode gone {left:.3f}s, -> exit {exited:.3f}s")
    assert left < 1.0, (left, d.log)
    assert exited < 2.0, (exited, d.log)
    assert "start_retry" not in after and "could not join the group yet" not in after, after
    assert "starting member" not in after, after  # no new member after the stop
    assert zk_client.get_children(f"/consumers/{GROUP}/ids") == [DEAD]


def test_sigterm_during_a_zookeeper_connection_attempt_exits_at_once(tmp_path: Path) -> None:
    """A connection attempt waits up to ``zk.connectiontimeout.ms`` (30 s here): a stop ends
    it at once -- no waiting for the timeout, no retry logged, no other member started."""
    port = restartable_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:  # bound, not listening
        holder.bind(("127.0.0.1", port))
        d = DaemonProcess(tmp_path, f"127.0.0.1:{port}", GROUP, [
            "--topic", "ev", "--output", str(tmp_path / "out.txt"),
            "--set", "zk.connectiontimeout.ms=30000"])
        try:
            wait_until(lambda: "starting member" in d.log or d.proc.poll() is not None,
                       timeout=30, what="the first connection attempt")
            assert d.proc.poll() is None, d.log
            _, exited, after = _sigterm(d, lambda: True)
        finally:
            d.close()
    print(f"SIGTERM -> exit {exited:.3f}s")
    assert exited < 1.0, (exited, d.log)
    assert "ZooKeeper not answering" not in after and "starting member" not in after, after
