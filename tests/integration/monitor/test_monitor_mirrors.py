"""A mirror and a bridge under the monitor: a real ``zkconsumer mirror`` (0.7 -> tansu) is an
ordinary 0.7 group to it (OK while it keeps up, STOP once it is gone with lag behind it); a
real bridge (tansu -> 0.7) shows as ``bridge:<group>`` with its target progress (written end
against the 0.7 log end) and source progress (next source offset per source partition)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from monitor_helpers import REPO, running_monitor

sys.path.insert(0, str(REPO / "tests" / "integration" / "mirror"))
from bridge_helpers import produce_modern, read_07, register_topic, start_bridge
from mirror_helpers import produce

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_mirror_is_a_group_ok_while_it_keeps_up_and_stop_when_gone(
        zk_connect: str, dev_broker: Any, tansu: Any, tmp_path: Path) -> None:
    dev_broker(num_partitions=2)
    create_topic(tansu.bootstrap, "orders", 2)
    produce(zk_connect, "orders", [f"m-{i}".encode() for i in range(200)])
    log = open(tmp_path / "mirror.log", "wb")  # noqa: SIM115 - closed below
    port = _free_port()
    mirror = subprocess.Popen(
        [sys.executable, "-m", "zkconsumer", "mirror", "--zk", zk_connect, "--group", "mirror",
         "--topic", "orders", "--to", tansu.url, "--set", "mirror.commit.interval.ms=50",
         "--set", "mirror.poll.batch=50", "--metrics-port", str(port)],
        stdout=subprocess.DEVNULL, stderr=log, cwd=str(REPO))
    metrics = f"http://127.0.0.1:{port}/metrics"
    try:
        with running_monitor(zk_connect, mirrors={"mirror": metrics}) as mon:
            def caught_up() -> bool:
                g = mon.group("mirror")
                return bool(g and g["status"] == "OK" and g["members"] and g["partitions"]
                            and all(p["lag"] == 0 for p in g["partitions"] if p["log_end"]))
            wait_until(caught_up, timeout=60, what="the mirror's group caught up and OK")
            # the target side, from the mirror's own /metrics: all 200 acknowledged
            target = wait_until(lambda: (lambda t: t if t and t.get("messages") == 200 else None)(
                mon.group("mirror").get("target")), timeout=30, what="target progress")
            assert target["url"] == metrics and target["in_flight"] == 0
            assert target["healthy"] == 1 and target["target_errors"] == 0
            mirror.send_signal(signal.SIGTERM)
            assert mirror.wait(30) == 0, (tmp_path / "mirror.log").read_text()
            produce(zk_connect, "orders", [f"n-{i}".encode() for i in range(50)])
            g = mon.wait_status("mirror", "STOP")
            assert g["members"] == [] and g["total_lag"] > 0
            assert "mirror metrics unreadable" in g["target"]["error"]
    finally:
        if mirror.poll() is None:
            mirror.kill()
            mirror.wait(10)
        log.close()


def test_a_bridge_shows_source_and_target_progress(zk_connect: str, dev_broker: Any,
                                                   tansu: Any) -> None:
    brokers = dev_broker.many(1, num_partitions=2)
    register_topic(brokers, "orders07", 2)
    wait_until(lambda: len(read_07(zk_connect, "orders07")) == 2, what="0.7 topic registered")
    create_topic(tansu.bootstrap, "orders", 2)
    produce_modern(tansu.bootstrap, "orders", [(None, f"r{i}".encode()) for i in range(100)], 2)
    bridge = start_bridge(tansu.bootstrap, zk_connect, ["orders"], group="b1",
                          partitioning="preserve", topic_map={"orders": "orders07"})
    stopped = False
    try:
        with running_monitor(zk_connect) as mon:
            def copied() -> dict[str, Any] | None:
                g = mon.group("bridge:b1")
                if not g or g["status"] != "OK" or len(g["partitions"]) != 2:
                    return None
                sources = {k: v for p in g["partitions"] for k, v in (p["sources"] or {}).items()}
                done = sources == {"orders/0": 50, "orders/1": 50} and all(
                    p["offset"] == p["log_end"] and p["offset"] > 0 for p in g["partitions"])
                return g if done else None
            g = wait_until(copied, timeout=60, what="the bridge's progress in the monitor")
            assert g["kind"] == "bridge" and len(g["members"]) == 1
            assert [p["partition"] for p in g["partitions"]] == ["0-0", "0-1"]
            listed = {x["group"]: x["kind"] for x in mon.api("/v1/groups")}
            assert listed["bridge:b1"] == "bridge"
            bridge.stop()
            stopped = True
            g = mon.wait_status("bridge:b1", "STOP")
            assert g["members"] == []
            assert all("no live bridge process" in p["reason"] for p in g["partitions"])
    finally:
        if not stopped:
            bridge.stop()
