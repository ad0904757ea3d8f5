"""A subscribed topic that no broker has registered is visible, not silently waited on.

``zkconsumer run --topic T`` for a T that does not exist (a typo, a topic not produced to
yet) registers and owns nothing of it -- correct, as 0.7 does, since the first broker that
gets T makes every member rebalance -- but says so (issue 11): a WARNING, the
``zkconsumer_unregistered_topics`` gauge, ``/healthz`` (still 200: not the member's fault)
naming the topic, and ``group describe`` ("topic not registered").  When a broker registers
the topic, all of it clears and the member consumes it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from fixtures.http import get as _get
from fixtures.waiting import wait_until
from prometheus_client.parser import text_string_to_metric_families

from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.producer import Producer

ROOT = Path(__file__).resolve().parents[3]



def _gauge(port: int, name: str) -> float:
    _, text = _get(f"http://127.0.0.1:{port}/metrics")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"{name} not in /metrics")


def _produce(zk_connect: str, topic: str, values: list[bytes]) -> None:
    with Producer(zk_connect=zk_connect) as producer:
        producer.send(topic, values)


def _lines(path: Path) -> list[bytes]:
    data = path.read_bytes() if path.exists() else b""
    return data[:data.rfind(b"\n") + 1].splitlines()


def test_missing_topic_is_warned_gauged_healthz_and_described(
        tmp_path: Path, dev_broker: Any, zk_connect: str) -> None:
    dev_broker(num_partitions=1)
    _produce(zk_connect, "ev", [b"e1"])
    port = restartable_port()
    out = tmp_path / "out.txt"
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zkconsumer", "run", "--zk", zk_connect, "--group", "g",
             "--topic", "ev", "--topic", "later", "--output", str(out), "--metrics-port",
             str(port), "--health-idle-timeout", "0.5", "--shutdown-timeout", "5"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    try:
        # The WARNING comes from a listener that runs after the rebalance reached STABLE:
        # wait for it, not for STABLE (which can be logged first).
        warning = ("WARNING zkconsumer.daemon.topics: subscribed topic(s) later not registered "
                   "by any broker in ZooKeeper (no /brokers/topics/later/<broker id>)")
        wait_until(lambda: warning in log_path.read_text() or proc.poll() is not None,
                   what="the member joined and warned")
        assert proc.poll() is None, log_path.read_text()
        text = log_path.read_text()
        assert "ev" not in text.split("subscribed topic(s) ", 1)[1].split(" not registered")[0]
        assert _gauge(port, "zkconsumer_unregistered_topics") == 1
        assert _get(f"http://127.0.0.1:{port}/healthz") == (
            200, "ok; topic(s) not registered by any broker: later\n")
        described = subprocess.run(
            [sys.executable, "-m", "zkconsumer", "group", "describe", "--zk", zk_connect,
             "--group", "g", "--no-log-end", "--verify"],
            cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert described.returncode == 0, described.stderr
        [row] = [line for line in described.stdout.splitlines()
                 if line.startswith("later ")]
        assert row.endswith("topic not registered")

        _produce(zk_connect, "later", [b"l1"])  # the broker registers the topic
        wait_until(lambda: _gauge(port, "zkconsumer_unregistered_topics") == 0,
                   what="the gauge to clear")
        assert _get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        assert "topic later is now registered by a broker" in log_path.read_text()
        wait_until(lambda: sorted(_lines(out)) == [b"e1", b"l1"], what="both topics consumed")
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(20)
