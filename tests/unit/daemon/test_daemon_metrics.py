"""Metrics over real HTTP: Prometheus text from a snapshot, /healthz 200/503, progress line."""

from __future__ import annotations

import io

from fixtures.http import get as _get
from prometheus_client.parser import text_string_to_metric_families

from zkconsumer.daemon.metrics import DaemonMetrics, Snapshot
from zkconsumer.telemetry.http import MetricsServer
from zkconsumer.telemetry.progress import Progress, format_bytes


def _values(text: str) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return out


def test_metrics_and_health_endpoints() -> None:
    snap = Snapshot(consumed_messages=10, consumed_bytes=1000, acked_messages=7,
                    owned_partitions=2, inflight=3, zk_connected=True, healthy=True,
                    lag={("ev", "0-1"): 42})
    health = {"ok": (True, "ok")}
    metrics = DaemonMetrics(lambda: snap)
    server = MetricsServer("127.0.0.1", 0, metrics, lambda: health["ok"])
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        status, text = _get(base + "/metrics")
        assert status == 200
        v = _values(text)
        assert v["zkconsumer_messages_consumed_total"] == 10
        assert v["zkconsumer_messages_acknowledged_total"] == 7
        assert v["zkconsumer_owned_partitions"] == 2
        assert v["zkconsumer_lag_bytes{partition=0-1,topic=ev}"] == 42
        snap.consumed_messages = 25  # values move between scrapes
        metrics.commit_latency.observe(0.003)
        v = _values(_get(base + "/metrics")[1])
        assert v["zkconsumer_messages_consumed_total"] == 25
        assert v["zkconsumer_commit_latency_seconds_count"] == 1
        assert _get(base + "/healthz") == (200, "ok\n")
        health["ok"] = (False, "ZooKeeper session lost")
        assert _get(base + "/healthz") == (503, "ZooKeeper session lost\n")
        assert _get(base + "/nope")[0] == 404
    finally:
        server.close()


def test_registries_are_per_daemon() -> None:
    a = DaemonMetrics(lambda: Snapshot(consumed_messages=1))
    b = DaemonMetrics(lambda: Snapshot(consumed_messages=2))
    assert "zkconsumer_messages_consumed_total 1.0" in a.render().decode()
    assert "zkconsumer_messages_consumed_total 2.0" in b.render().decode()


def test_progress_line() -> None:
    now = [0.0]
    stream = io.StringIO()
    p = Progress(stream, clock=lambda: now[0], force=True)
    assert p.update(100, 1000, None, 1, 0) is None  # not due yet
    now[0] = 2.0
    text = p.update(20000, 2_000_000, 5_000_000, 4, 12)  # since t=0: 0 msgs
    assert text is not None
    assert "10,000 msg/s" in text and "1.0 MB/s" in text and "lag 5.0 MB" in text
    assert "partitions 4" in text and "in-flight 12" in text
    assert stream.getvalue().startswith("\r")
    p.finish()
    assert stream.getvalue().endswith("\n")


def test_progress_disabled_when_not_a_terminal() -> None:
    stream = io.StringIO()
    p = Progress(stream, clock=lambda: 100.0)
    assert not p.enabled and p.update(1, 1, 0, 0, 0) is None and stream.getvalue() == ""


def test_format_bytes() -> None:
    assert format_bytes(999) == "999 B"
    assert format_bytes(1500) == "1.5 KB"
    assert format_bytes(3_200_000_000) == "3.2 GB"
