"""SIGTERM while ZooKeeper hangs: ``--shutdown-timeout`` bounds the whole stop, commits included
(issue 11).  Before, the final commit waited one ZooKeeper operation timeout per partition,
one after another (8 partitions: minutes), past any supervisor's stop timeout.

The member talks to ZooKeeper through a TCP proxy that is paused (connections open, silent):
the hang of an overloaded or partitioned ZooKeeper.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from daemon_it_helpers import DaemonProcess, produce, read_lines, values
from fixtures.waiting import wait_until

from zkconsumer.bench.soak_proxy import TcpProxy

SHUTDOWN_TIMEOUT = 3.0


@pytest.fixture
def zk_proxy(zk_server: Any, tcp_proxy: Callable[[int], TcpProxy]) -> TcpProxy:
    """A TCP proxy in front of the test ZooKeeper (the `tcp_proxy` fixture)."""
    return tcp_proxy(zk_server.port)


def test_sigterm_with_a_hung_zookeeper_keeps_the_shutdown_timeout(
        tmp_path: Path, dev_broker: Any, zk_connect: str, zk_chroot: str,
        zk_proxy: TcpProxy) -> None:
    dev_broker.many(2, num_partitions=4)
    produce(zk_connect, "ev", values("h", 400))
    out = tmp_path / "out.txt"
    d = DaemonProcess(tmp_path, f"{zk_proxy.address}{zk_chroot}", "g",
                      ["--topic", "ev", "--output", str(out),
                       "--shutdown-timeout", str(SHUTDOWN_TIMEOUT),  # (the last one counts)
                       "--set", "autocommit.interval.ms=600000",  # all 8 left to the stop
                       "--set", "zk.sessiontimeout.ms=6000"])
    try:
        d.wait_stable()
        wait_until(lambda: len(read_lines(out)) == 400, what="every message written")
        zk_proxy.pause()
        started = time.monotonic()
        d.send_signal(signal.SIGTERM)
        d.proc.wait(SHUTDOWN_TIMEOUT + 10)
        elapsed = time.monotonic() - started
    finally:
        zk_proxy.resume()
        d.close()
    assert d.proc.returncode == 0, d.log
    assert elapsed < SHUTDOWN_TIMEOUT + 3.0, (elapsed, d.log)
    # what could not be committed is said, with every partition and its offset
    assert "not committed in time" in d.log, d.log
    line = next(x for x in d.log.splitlines() if "not committed in time" in x)
    assert all(f"ev/{b}-{p}=" in line for b in range(2) for p in range(4)), line
