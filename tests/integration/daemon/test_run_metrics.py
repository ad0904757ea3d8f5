"""Metrics, /healthz and ZooKeeper session loss of ``zkconsumer run``.

Subprocess daemons for the HTTP endpoints; an in-process `Daemon` (run in a thread) for the
session-expiry test, because expiring a session for real needs the member's kazoo client.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from daemon_it_helpers import REPO, DaemonProcess, env_with_repo, produce, read_lines, values
from fixtures.http import get as _get
from fixtures.waiting import wait_until
from fixtures.zookeeper import expire_session
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from zkconsumer.daemon import cli
from zkconsumer.daemon.config import build_config
from zkconsumer.daemon.runner import Daemon
from zkconsumer.devcluster.ports import restartable_port


def _metrics(port: int) -> dict[str, float]:
    status, text = _get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return out


def test_metrics_move_and_healthz(tmp_path: Path, dev_broker: Any, zk_connect: str,
                                  zk_client: KazooClient) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("m", 100))
    p1, p2 = restartable_port(), restartable_port()
    out1, out2 = tmp_path / "1.txt", tmp_path / "2.txt"
    common = ["--topic", "ev", "--set", "autocommit.interval.ms=100",
              "--health-idle-timeout", "0.5"]
    a = DaemonProcess(tmp_path, zk_connect, "g", [*common, "--output", str(out1),
                                                  "--metrics-port", str(p1)], name="a")
    try:
        a.wait_stable()
        wait_until(lambda: len(read_lines(out1)) == 100, what="100 consumed")
        # acknowledgements, commits and the lag (known once the fetcher reached the end)
        # arrive after the output is written: wait for all of what is asserted below
        m = wait_until(lambda: (lambda v: v if v["zkconsumer_commits_total"] >= 1
                                and v["zkconsumer_messages_acknowledged_total"] == 100
                                and v.get("zkconsumer_lag_bytes{partition=0-0,topic=ev}") == 0
                                else None)(_metrics(p1)),
                       what="a commit, every acknowledgement and the lag in the metrics")
        assert m["zkconsumer_messages_consumed_total"] == 100
        assert m["zkconsumer_bytes_consumed_total"] == sum(len(v) for v in values("m", 100))
        assert m["zkconsumer_messages_acknowledged_total"] == 100
        assert m["zkconsumer_owned_partitions"] == 1
        assert m["zkconsumer_zookeeper_connected"] == 1
        assert m["zkconsumer_commit_latency_seconds_count"] >= 1
        assert m["zkconsumer_lag_bytes{partition=0-0,topic=ev}"] == 0
        assert _get(f"http://127.0.0.1:{p1}/healthz") == (200, "ok\n")
        produce(zk_connect, "ev", values("n", 50))
        wait_until(lambda: _metrics(p1)["zkconsumer_messages_consumed_total"] == 150,
                   what="counter moved")

        # a second member of the group gets nothing (one partition): a standby, healthy
        b = DaemonProcess(tmp_path, zk_connect, "g", [*common, "--output", str(out2),
                                                      "--metrics-port", str(p2)], name="b")
        try:
            b.wait_stable()
            status, reason = wait_until(
                lambda: (lambda r: r if r[1].startswith("standby") else None)(
                    _get(f"http://127.0.0.1:{p2}/healthz")), what="idle member is a standby")
            assert (status, reason) == (200, "standby: 2 consumer threads for 1 partitions, "
                                             "every partition owned\n")
            assert _metrics(p2)["zkconsumer_healthy"] == 1
            # the partition loses its owner znode (a broken group): the idle member fails
            zk_client.delete("/consumers/g/owners/ev/0-0")
            status, reason = wait_until(
                lambda: (lambda r: r if r[0] == 503 else None)(
                    _get(f"http://127.0.0.1:{p2}/healthz")), what="idle member unhealthy")
            assert "owns no partition" in reason
            assert "1 partition(s) of its topics have no live owner (ev/0-0)" in reason
            assert _metrics(p2)["zkconsumer_healthy"] == 0
            assert a.stop() == 0, a.log  # b takes the partition over and is healthy again
            wait_until(lambda: _get(f"http://127.0.0.1:{p2}/healthz")[0] == 200,
                       timeout=15, what="healthy after taking over")
            assert b.stop() == 0, b.log
        finally:
            b.close()
    finally:
        a.close()


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(argv))


def test_session_loss_is_reported_and_survived(tmp_path: Path, dev_broker: Any,
                                               zk_connect: str) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "ev", values("s", 50))
    out = tmp_path / "out.txt"
    config = build_config(_args("--zk", zk_connect, "--group", "g", "--topic", "ev",
                                "--output", str(out), "--set", "autocommit.interval.ms=100"))
    daemon = Daemon(config)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(daemon.run()), daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(read_lines(out)) == 50, what="first messages")
        assert daemon.health() == (True, "ok")
        consumer = daemon.consumer
        assert consumer is not None
        expire_session(consumer.session)
        wait_until(lambda: daemon.session_losses == 1, what="session loss seen")
        wait_until(lambda: daemon.health()[0] and daemon.state == "STABLE", timeout=20,
                   what="member rejoined")
        produce(zk_connect, "ev", values("t", 20))
        wait_until(lambda: set(values("t", 20)) <= set(read_lines(out)),
                   what="consuming after the new session")
        assert set(read_lines(out)) == set(values("s", 50) + values("t", 20))
    finally:
        daemon.request_stop()
        thread.join(20)
    assert result == [0]


def test_health_reports_session_lost_state() -> None:
    config = build_config(_args("--zk", "127.0.0.1:1", "--group", "g", "--topic", "t",
                                "--output", "-"))
    daemon = Daemon(config)
    daemon._state("STABLE")
    assert daemon.health() == (True, "ok")
    daemon._state("SESSION_LOST")
    assert daemon.health() == (False, "ZooKeeper session lost")
    daemon._state("STABLE")
    assert daemon.health()[0] is True


def test_cli_bad_config_exits_1_with_clear_message(tmp_path: Path) -> None:
    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "zkconsumer", "run", *argv],
                              capture_output=True, text=True, cwd=REPO, env=env_with_repo(),
                              timeout=60)

    r = run("--zk", "127.0.0.1:1", "--group", "g", "--topic", "t", "--output", "-",
            "--set", "fetch.sise=10")
    assert r.returncode == 1
    assert "--set fetch.sise: unknown consumer property (did you mean fetch.size?)" in r.stderr
    r = run("--zk", "127.0.0.1:1", "--group", "g", "--topic", "t", "--handler", "nosuchmod:f")
    assert r.returncode == 1 and "cannot import 'nosuchmod'" in r.stderr
    r = run("--zk", "127.0.0.1:1", "--group", "g", "--topic", "t")
    assert r.returncode == 2 and "one of the arguments --output --exec --handler" in r.stderr
