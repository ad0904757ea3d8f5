"""Prometheus metrics and ``/healthz`` of one daemon, served over HTTP.

Why a collector that reads counters at scrape time instead of incrementing prometheus
objects on the hot path: the daemon moves hundreds of thousands of messages a second and a
scrape happens every few seconds, so the loop keeps plain integers and `DaemonCollector`
turns a `Snapshot` into metric families only when asked.  Every daemon has its own
`CollectorRegistry` (never the global one), so several daemons -- e.g. in one test process --
do not collide.

Endpoints (`zkconsumer.telemetry.http.MetricsServer`): ``/metrics`` (Prometheus text format), ``/healthz`` (200 ``ok``
or ``standby: ...``, followed by ``; topic(s) not registered by any broker: ...`` while a
subscribed topic does not exist, or 503 with the reason: ZooKeeper session lost, or no partition owned
for longer than ``--health-idle-timeout`` although the member should own one or a partition
has no live owner -- `zkconsumer.daemon.health`).

Metric names (all prefixed ``zkconsumer_``; documented in docs/operations.md):
``messages_consumed_total``, ``bytes_consumed_total``, ``messages_acknowledged_total``,
``messages_redelivered_total``, ``messages_dead_lettered_total``, ``rebalances_total``,
``session_losses_total``, ``partition_errors_total``,
``commits_total``, ``commit_failures_total``, ``commit_latency_seconds`` (histogram),
``sink_errors_total``, ``sink_restarts_total``, ``owned_partitions``, ``inflight_messages``,
``lag_bytes{topic,partition}``, ``zookeeper_connected``, ``healthy``, ``unregistered_topics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["DaemonCollector", "DaemonMetrics", "Snapshot"]


@dataclass
class Snapshot:
    """Values of the daemon's counters at one instant."""

    consumed_messages: int = 0
    consumed_bytes: int = 0
    acked_messages: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    rebalances: int = 0
    session_losses: int = 0
    partition_errors: int = 0
    commits: int = 0
    commit_failures: int = 0
    sink_errors: int = 0
    sink_restarts: int = 0
    owned_partitions: int = 0
    inflight: int = 0
    zk_connected: bool = False
    healthy: bool = False
    lag: dict[tuple[str, str], int] = field(default_factory=dict)
    unregistered_topics: int = 0


class DaemonCollector(Collector):
    """Turns `Snapshot` values into Prometheus metric families at scrape time."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self._snapshot()
        for name, doc, value in (
            ("messages_consumed", "Messages handed to the sink.", s.consumed_messages),
            ("bytes_consumed", "Payload bytes handed to the sink.", s.consumed_bytes),
            ("messages_acknowledged", "Messages the sink acknowledged.", s.acked_messages),
            ("messages_redelivered", "Messages written again to a restarted exec child.",
             s.redelivered),
            ("messages_dead_lettered", "Messages sent to the dead letter.", s.dead_lettered),
            ("rebalances", "Rebalances of this member (revocations).", s.rebalances),
            ("session_losses", "ZooKeeper sessions lost (expired).", s.session_losses),
            ("partition_errors", "Partitions a fetcher stopped on (too large, corrupt, broker "
             "error) until the next rebalance.", s.partition_errors),
            ("commits", "Offset commits to ZooKeeper.", s.commits),
            ("commit_failures", "Offset commits that failed.", s.commit_failures),
            ("sink_errors", "Sink failures (handler exceptions, child exits, write errors).",
             s.sink_errors),
            ("sink_restarts", "Restarts of the exec child.", s.sink_restarts),
        ):
            yield CounterMetricFamily(f"zkconsumer_{name}", doc, value=value)
        for name, doc, value in (
            ("owned_partitions", "Partitions this member owns.", s.owned_partitions),
            ("inflight_messages", "Messages given to the sink and not acknowledged yet.",
             s.inflight),
            ("zookeeper_connected", "1 while the ZooKeeper session is usable.",
             int(s.zk_connected)),
            ("healthy", "1 while /healthz answers 200.", int(s.healthy)),
            ("unregistered_topics", "Subscribed topics no broker has registered in ZooKeeper "
             "(nothing to consume there yet; /healthz names them).", s.unregistered_topics),
        ):
            yield GaugeMetricFamily(f"zkconsumer_{name}", doc, value=value)
        lag = GaugeMetricFamily("zkconsumer_lag_bytes",
                                "Bytes between the consumed position and the log end "
                                "(known once the fetcher reached the end).",
                                labels=["topic", "partition"])
        for (topic, partition), value in sorted(s.lag.items()):
            lag.add_metric([topic, partition], value)
        yield lag


class DaemonMetrics:
    """The daemon's registry: the snapshot collector plus a commit-latency histogram."""

    def __init__(self, snapshot: Callable[[], Snapshot]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(DaemonCollector(snapshot))
        self.commit_latency = Histogram(
            "zkconsumer_commit_latency_seconds", "Time to write the offsets of one commit.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=self.registry)

    def render(self) -> bytes:
        return generate_latest(self.registry)
