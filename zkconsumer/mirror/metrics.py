"""Counters of one mirror process, and their Prometheus view.

`MirrorStats` is plain numbers behind a lock: the mirror loop and the target client's I/O
thread both update it, the progress line and the benchmark read it.  `MirrorCollector`
exposes it (plus the source consumer's per-partition lag and committed offsets) to a
*private* `CollectorRegistry`, so two mirrors in one process (tests, the benchmark) never
collide in prometheus_client's global registry.

"Mirrored" means acknowledged by the target *and* part of a partition's in-order
acknowledged prefix, i.e. safe to commit: counted once per source message, resends excluded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MirrorCollector", "MirrorMetrics", "MirrorProgress", "MirrorStats", "lag_messages",
           "start_metrics_server"]


def lag_messages(snap: dict[str, Any], lag_bytes: int | None) -> int | None:
    """End-to-end lag in messages: handed out and not yet on the target (in flight), plus
    the source lag in bytes converted at the average 0.7 log bytes per mirrored message (0.7
    offsets are byte positions, so the unread count is an estimate).  None until known."""
    if lag_bytes is None or not snap.get("log_bytes") or not snap.get("messages"):
        return None
    per_message = float(snap["log_bytes"]) / float(snap["messages"])
    return int(snap["in_flight"]) + round(lag_bytes / per_message)


@dataclass
class MirrorStats:
    messages: int = 0  # mirrored (acknowledged in order), per source message
    bytes: int = 0  # payload bytes of those
    sent: int = 0  # sends handed to the target client, resends included
    target_errors: int = 0  # failed deliveries reported by the target client
    retries: int = 0  # retry rounds (each resends from the first failure on)
    commits: int = 0
    transactions: int = 0  # exactly-once: committed target transactions
    log_bytes: int = 0  # exactly-once: 0.7 log bytes the committed transactions covered
    in_flight: int = 0
    partition_errors: int = 0  # source partitions parked (corrupt data, bad offset...)
    looped: int = 0  # skipped: written by the other direction (no loops)
    skipped: int = 0  # skipped: in the target already (written before a crash)
    healthy: bool = True  # False while a target failure is being retried
    zk_unreachable: str | None = None  # why the 0.7 ZooKeeper is not answering at start-up
    started: float = field(default_factory=time.monotonic)
    per_topic: dict[str, list[int]] = field(default_factory=dict)  # topic -> [messages, bytes]
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def mirrored(self, topic: str, count: int, size: int) -> None:
        with self._lock:
            self.messages += count
            self.bytes += size
            row = self.per_topic.get(topic)
            if row is None:
                row = self.per_topic[topic] = [0, 0]
            row[0] += count
            row[1] += size

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {
                "messages": self.messages, "bytes": self.bytes, "sent": self.sent,
                "target_errors": self.target_errors, "retries": self.retries,
                "commits": self.commits, "transactions": self.transactions,
                "log_bytes": self.log_bytes, "looped": self.looped, "skipped": self.skipped,
                "in_flight": self.in_flight,
                "healthy": self.healthy and self.zk_unreachable is None,
                "elapsed": time.monotonic() - self.started,
                "per_topic": {t: tuple(v) for t, v in self.per_topic.items()},
            }


class MirrorCollector:
    """A prometheus_client custom collector over `MirrorStats` and the consumer's stats."""

    def __init__(self, stats: MirrorStats,
                 partitions: Callable[[], dict[str, dict[str, Any]]] | None = None,
                 behind: Callable[[], int | None] | None = None) -> None:
        self._stats = stats
        self._partitions = partitions
        #: the end-to-end lag in messages when the engine knows it directly (the bridge's
        #: source counts messages); else it is estimated from the byte lag (`lag_messages`)
        self._behind = behind

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self._stats.snapshot()
        msgs = CounterMetricFamily("zkconsumer_mirror_messages",
                                   "Messages mirrored (acknowledged by the target, in order)",
                                   labels=["topic"])
        nbytes = CounterMetricFamily("zkconsumer_mirror_bytes",
                                     "Payload bytes mirrored", labels=["topic"])
        for topic, (m, b) in sorted(snap["per_topic"].items()):
            msgs.add_metric([topic], m)
            nbytes.add_metric([topic], b)
        yield msgs
        yield nbytes
        yield CounterMetricFamily("zkconsumer_mirror_target_errors",
                                  "Deliveries the target failed (each is retried)",
                                  value=snap["target_errors"])
        yield CounterMetricFamily("zkconsumer_mirror_retries",
                                  "Retry rounds after target failures", value=snap["retries"])
        yield CounterMetricFamily("zkconsumer_mirror_commits",
                                  "Offset commits to ZooKeeper", value=snap["commits"])
        yield CounterMetricFamily("zkconsumer_mirror_transactions",
                                  "Target transactions committed (exactly-once mode)",
                                  value=snap["transactions"])
        yield CounterMetricFamily("zkconsumer_mirror_looped",
                                  "Records not copied because the other direction wrote them "
                                  "(no loops)", value=snap["looped"])
        yield CounterMetricFamily("zkconsumer_mirror_skipped",
                                  "Records not written because the target has them already "
                                  "(bridge, after a crash)", value=snap["skipped"])
        yield GaugeMetricFamily("zkconsumer_mirror_in_flight",
                                "Messages sent and not yet committable", value=snap["in_flight"])
        yield GaugeMetricFamily("zkconsumer_mirror_healthy",
                                "1 when the target accepts writes, 0 while retrying",
                                value=1 if snap["healthy"] else 0)
        if self._behind is not None:
            known = self._behind()
            if known is not None:
                yield GaugeMetricFamily("zkconsumer_mirror_lag_messages",
                                        "End-to-end lag in messages (source records not yet "
                                        "on the target)", value=known)
        if self._partitions is None:
            return
        lag = GaugeMetricFamily("zkconsumer_mirror_source_lag_bytes",
                                "Source partition lag (log end - committed), bytes",
                                labels=["topic", "partition"])
        committed = GaugeMetricFamily("zkconsumer_mirror_source_committed_offset",
                                      "Committed 0.7 byte offset per source partition",
                                      labels=["topic", "partition"])
        try:
            parts = self._partitions()
        except Exception:  # a consumer mid-rebalance must not break the scrape
            parts = {}
        for name, info in sorted(parts.items()):
            topic, _, partition = name.rpartition("/")
            if info.get("lag") is not None:
                lag.add_metric([topic, partition], info["lag"])
            if info.get("committed") is not None:
                committed.add_metric([topic, partition], info["committed"])
        yield lag
        yield committed
        lags = [info["lag"] for info in parts.values() if info.get("lag") is not None]
        behind = lag_messages(snap, sum(lags) if lags else None)
        if behind is not None:
            yield GaugeMetricFamily("zkconsumer_mirror_lag_messages",
                                    "End-to-end lag in messages: in flight plus the source lag "
                                    "at the average 0.7 bytes per message (estimate)",
                                    value=behind)


class MirrorMetrics:
    """A private registry holding one `MirrorCollector`; ``render`` is what ``/metrics`` serves.

    Served by `zkconsumer.telemetry.http.MetricsServer` (``/metrics`` and ``/healthz``, shared
    with the daemon), which needs only ``render``.
    """

    def __init__(self, collector: MirrorCollector) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)  # type: ignore[arg-type]

    def render(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


def start_metrics_server(port: int, metrics: MirrorMetrics,
                         health: Callable[[], tuple[bool, str]],
                         host: str = "0.0.0.0") -> Any:
    """Start ``/metrics`` + ``/healthz`` on ``host:port`` (0 = free port); returns the server
    (``.port``, ``.close()``)."""
    from zkconsumer.telemetry.http import MetricsServer

    server = MetricsServer(host, port, metrics, health)
    server.start()
    return server


class MirrorProgress:
    """``--progress`` for the mirror: the daemon's status line plus the target transaction
    rate and the end-to-end lag in messages (`lag_messages`)."""

    def __init__(self, stream: Any, *, interval: float, force: bool) -> None:
        from zkconsumer.telemetry.progress import Progress

        self._bar = Progress(stream, interval=interval, force=force)
        self._stream = stream
        self._last = (time.monotonic(), 0)

    def update(self, snap: dict[str, Any], lag_bytes: int | None, owned: int,
               behind: int | None = None) -> str | None:
        """Redraw if due; ``behind``: the lag in messages when known directly (else
        estimated from ``lag_bytes``, see `lag_messages`)."""
        text = self._bar.update(snap["messages"], snap["bytes"], lag_bytes, owned,
                                snap["in_flight"])
        if text is None:
            return None
        now, txns = time.monotonic(), snap.get("transactions", 0)
        rate = (txns - self._last[1]) / max(1e-9, now - self._last[0])
        self._last = (now, txns)
        if behind is None:
            behind = lag_messages(snap, lag_bytes)
        extra = f"  txn/s {rate:,.1f}  lag {'?' if behind is None else f'{behind:,}'} msgs"
        self._stream.write(extra + "\x1b[K")
        self._stream.flush()
        return text + extra

    def finish(self) -> None:
        self._bar.finish()
