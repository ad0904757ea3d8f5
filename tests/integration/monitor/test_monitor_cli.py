"""``zkconsumer monitor`` as a real process: serves the API and /metrics on the port it prints,
keeps the history in --store across a restart, ends cleanly on SIGTERM; --help shows the
defaults; --once on an unreachable ZooKeeper is "unknown" (3)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.http import get
from fixtures.waiting import wait_until
from monitor_helpers import REPO, monitor_once, produce_to, scala_commit, scala_member, scala_owner

pytestmark = pytest.mark.slow


def _serve(zk_connect: str, log: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "zkconsumer", "monitor", "--zk",
                                 zk_connect, "--port", "0", "--interval", "0.3", "--window",
                                 "3", *args], stderr=err, stdout=subprocess.DEVNULL,
                                cwd=str(REPO))
    m = wait_until(lambda: re.search(r"serving (http://\S+/) ", log.read_text()), timeout=30,
                   what="monitor start line")
    return proc, m.group(1)


def _groups(url: str) -> list[dict[str, Any]] | None:
    status, body = get(url + "v1/groups")
    return json.loads(body) if status == 200 and json.loads(body) else None


def test_serves_api_and_metrics_keeps_history_and_stops_on_sigterm(
        zk_connect: str, zk_client: Any, dev_broker: Any, tmp_path: Path) -> None:
    broker = dev_broker(num_partitions=1)
    end = produce_to(broker, "orders", 0, 3)
    scala_member(zk_client, "billing", "c1", {"orders": 1})
    scala_owner(zk_client, "billing", "orders", "0-0", "c1-0")
    scala_commit(zk_client, "billing", "orders", "0-0", end - 10)
    store = tmp_path / "monitor.db"
    proc, url = _serve(zk_connect, tmp_path / "m1.log", "--store", str(store))
    try:
        (g,) = wait_until(lambda: _groups(url), what="first evaluation")
        assert g["group"] == "billing" and g["partitions"][0]["lag"] == 10
        status, metrics = get(url + "metrics")
        assert status == 200
        labels = 'consumergroup="billing",partition="0-0",topic="orders"'
        assert f"kafka_consumergroup_lag{{{labels}}} 10.0" in metrics
        assert f"kafka_consumergroup_current_offset{{{labels}}} {end - 10}.0" in metrics
        assert f'kafka_topic_partition_current_offset{{partition="0-0",topic="orders"}} ' \
               f"{end}.0" in metrics
        assert 'kafka_consumergroup_members{consumergroup="billing"} 1.0' in metrics
        assert re.search(r'zkconsumer_monitor_group_status\{consumergroup="billing"\} \d', metrics)
        reads = re.search(r"zkconsumer_monitor_zookeeper_reads_total (\d+)", metrics)
        assert reads and int(reads.group(1)) > 0
        assert "zkconsumer_monitor_poll_duration_seconds" in metrics
        assert "zkconsumer_monitor_broker_requests_total" in metrics
        assert get(url + "healthz")[0] == 200
        assert get(url + "v1/groups/nope")[0] == 404
        page = get(url + "groups/billing")
        assert page[0] == 200 and "/static/app.js" in page[1]
        assert get(url + "static/app.js")[0] == 200
        wait_until(lambda: len(json.loads(get(url + "v1/groups/billing")[1])["history"]) >= 5,
                   what="five samples")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    proc, url = _serve(zk_connect, tmp_path / "m2.log", "--store", str(store))
    try:
        history = wait_until(lambda: json.loads(get(url + "v1/groups/billing")[1]).get(
            "history"), what="history after restart")
        assert len(history) >= 6  # the five before the restart and the new poll
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0


def test_help_and_unreachable_zookeeper() -> None:
    help_text = subprocess.run([sys.executable, "-m", "zkconsumer", "monitor", "--help"],
                               capture_output=True, text=True, cwd=str(REPO)).stdout
    help_text = " ".join(help_text.split())
    for needle in ("default: 127.0.0.1", "default: 30", "STALL", "exit status", "--once"):
        assert needle in help_text
    for bad in (["--groups", "("], ["--window", "1"], ["--history", "5"]):
        usage = monitor_once("127.0.0.1:1", *bad)
        assert usage.returncode == 2 and usage.stderr.count("\n") == 1, usage.stderr
    done = monitor_once("127.0.0.1:1")
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().startswith("zkconsumer monitor: error:")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_once_with_store_uses_the_history_of_earlier_runs(
        zk_connect: str, zk_client: Any, dev_broker: Any, tmp_path: Path) -> None:
    """A Scala member rewrites the same offset every commit, so one sample cannot tell a
    stall (the mtime is fresh); cron runs of --once sharing --store can."""
    end = produce_to(dev_broker(num_partitions=1), "orders", 0, 3)
    scala_member(zk_client, "g", "c1", {"orders": 1})
    scala_owner(zk_client, "g", "orders", "0-0", "c1-0")
    store = str(tmp_path / "cron.db")
    args = ["--store", store, "--window", "2", "--interval", "4"]  # an 8 s window

    def cron_run() -> subprocess.CompletedProcess[str]:
        scala_commit(zk_client, "g", "orders", "0-0", end - 10)  # same value, fresh mtime
        return monitor_once(zk_connect, *args)

    first = cron_run()
    assert first.returncode == 0, first.stdout + first.stderr  # one sample: looks fine
    stalled = wait_until(lambda: (lambda r: r if r.returncode == 2 else None)(cron_run()),
                         timeout=60, what="a later cron run that sees the stall")
    assert "STALL" in stalled.stdout and "unchanged for" in stalled.stdout, stalled.stdout
    scala_commit(zk_client, "g", "orders", "0-0", end - 10)
    alone = monitor_once(zk_connect, "--window", "2", "--interval", "30")  # no history
    assert alone.returncode == 0, alone.stdout
