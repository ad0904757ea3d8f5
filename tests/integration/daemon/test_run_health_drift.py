"""``/healthz`` of ``zkconsumer run`` turns unhealthy when the member's assignment disagrees with
the group's decision for longer than ``--health-idle-timeout`` (issue 11, Defect 2), and
healthy again once it owns what it should."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path
from typing import Any

from daemon_it_helpers import produce, read_lines, values
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.daemon import cli
from zkconsumer.daemon.config import build_config
from zkconsumer.daemon.runner import Daemon


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(argv))


def test_lasting_assignment_drift_is_unhealthy(tmp_path: Path, dev_broker: Any,
                                               zk_connect: str,
                                               zk_client: KazooClient) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "ev", values("h", 20))
    out = tmp_path / "out.txt"
    config = build_config(_args("--zk", zk_connect, "--group", "g", "--topic", "ev",
                                "--output", str(out), "--health-idle-timeout", "1",
                                "--set", "rebalance.backoff.ms=200"))
    daemon = Daemon(config)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(daemon.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(read_lines(out)) == 20, what="first messages")
        assert daemon.health() == (True, "ok")
        # a (Scala) member joins and claims its half, then its ids znode vanishes while its
        # owner znode stays: the daemon is assigned ev/0-1 again but cannot claim it
        zk_client.create("/consumers/g/ids/g_z", b'{ "ev": 1 }', ephemeral=True)
        wait_until(lambda: daemon.consumer is not None
                   and daemon.consumer.owned_partitions() == {"ev": ["0-0"]},
                   what="released half")
        zk_client.create("/consumers/g/owners/ev/0-1", b"g_z-0", ephemeral=True)
        zk_client.delete("/consumers/g/ids/g_z")
        wait_until(lambda: not daemon.health()[0], timeout=20, what="unhealthy")
        _, reason = daemon.health()
        assert "assignment disagrees with the group's decision" in reason
        assert "ev/0-1 is assigned to" in reason
        zk_client.delete("/consumers/g/owners/ev/0-1")
        wait_until(lambda: daemon.health() == (True, "ok"), timeout=20, what="healthy again")
    finally:
        daemon.request_stop()
        thread.join(20)
    assert result == [0]
