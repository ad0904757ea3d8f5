"""Prometheus metrics of the monitor: kafka_exporter's names for the groups, plus its own cost.

kafka_exporter is what Prometheus users of Kafka already scrape, so the per-group and
per-partition series carry its names and labels (``consumergroup``, ``topic``,
``partition``) and its dashboards and alerts work unchanged.  The one difference: a 0.7
partition is identified by ``"<broker id>-<partition>"``, and that is the ``partition``
label (two brokers' partition 0 are different partitions).  Statuses use Burrow's numbers
(`zkconsumer.monitor.model.Status.number`).

Like the daemon's, a collector turns the published `MonitorState` into metric families at
scrape time on the monitor's own registry (never the global one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from zkconsumer.monitor.service import MonitorState

__all__ = ["MonitorMetrics"]

_G = ["consumergroup"]
_P = ["consumergroup", "topic", "partition"]


class _Collector(Collector):
    def __init__(self, state: Callable[[], MonitorState]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        st = self._state()
        lag = GaugeMetricFamily("kafka_consumergroup_lag",
                                "Lag of a group on a partition, in bytes (log end - offset)", labels=_P)
        cur = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Committed offset of a group on a partition", labels=_P)
        end = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                "Log end (latest offset) of a partition", labels=["topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum",
                                    "Total lag of a group on a topic, in bytes",
                                    labels=["consumergroup", "topic"])
        members = GaugeMetricFamily("kafka_consumergroup_members",
                                    "Registered members of a group", labels=_G)
        gstatus = GaugeMetricFamily(
            "zkconsumer_monitor_group_status",
            "Evaluation of a group (Burrow numbers: 0 NOTFOUND, 1 OK, 2 WARN, 3 ERR, 4 STOP, "
            "5 STALL, 6 REWIND)", labels=_G)
        pstatus = GaugeMetricFamily("zkconsumer_monitor_partition_status",
                                    "Evaluation of a partition (Burrow numbers)", labels=_P)
        ends: dict[tuple[str, str], int] = {}
        for name, ev in sorted(st.groups.items()):
            members.add_metric([name], len(ev.members))
            gstatus.add_metric([name], ev.status.number)
            per_topic: dict[str, int] = {}
            for p in ev.partitions:
                labels = [name, p.topic, p.partition]
                pstatus.add_metric(labels, p.status.number)
                if p.offset is not None:
                    cur.add_metric(labels, p.offset)
                if p.lag is not None:
                    lag.add_metric(labels, p.lag)
                    per_topic[p.topic] = per_topic.get(p.topic, 0) + p.lag
                if p.log_end is not None:
                    ends[(p.topic, p.partition)] = p.log_end
            for topic, total in sorted(per_topic.items()):
                lag_sum.add_metric([name, topic], total)
        for (topic, part), value in sorted(ends.items()):
            end.add_metric([topic, part], value)
        yield from (lag, cur, end, lag_sum, members, gstatus, pstatus)
        yield GaugeMetricFamily("zkconsumer_monitor_groups", "Groups evaluated by the last poll",
                                value=len(st.groups))
        yield GaugeMetricFamily("zkconsumer_monitor_poll_duration_seconds",
                                "Duration of the last poll (ZooKeeper reads and log ends)",
                                value=st.last_duration)
        yield GaugeMetricFamily("zkconsumer_monitor_last_poll_timestamp_seconds",
                                "Wall-clock time of the last successful poll",
                                value=st.polled_at or 0.0)
        yield GaugeMetricFamily("zkconsumer_monitor_poll_zookeeper_reads",
                                "ZooKeeper reads of the last poll", value=st.last_zk_reads)
        yield CounterMetricFamily("zkconsumer_monitor_polls", "Successful polls", value=st.polls)
        yield CounterMetricFamily("zkconsumer_monitor_poll_failures",
                                  "Polls that failed (the last evaluation stayed published)",
                                  value=st.poll_failures)
        yield CounterMetricFamily("zkconsumer_monitor_zookeeper_reads",
                                  "ZooKeeper read requests sent", value=st.zk_reads_total)
        yield CounterMetricFamily("zkconsumer_monitor_broker_requests",
                                  "Offsets requests sent to brokers (log ends)",
                                  value=st.broker_requests_total)
        yield CounterMetricFamily("zkconsumer_monitor_broker_errors",
                                  "Offsets requests that failed", value=st.broker_errors_total)


class MonitorMetrics:
    """The monitor's registry; `render` is the ``/metrics`` body."""

    def __init__(self, state: Callable[[], MonitorState]) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(state))

    def render(self) -> bytes:
        return generate_latest(self.registry)
