"""Streaming reads of ``kafka07``: byte-offset micro-batches with Spark's checkpoint as truth.

Offsets are ``{"topic": {"B-P": byte_offset}}`` (str keys: Spark stores them with
``json.dumps`` in ``<checkpoint>/offsets/<batch>`` and hands them back with ``json.loads``).
A restart from the checkpoint resumes at the last planned end; nothing is read twice or lost,
because a batch's range is fixed before it runs and every range ends on a message boundary.

Admission control (``maxBytesPerTrigger``): the budget is shared across partitions in
proportion to their backlog.  0.7 has no message index, so an end offset must be *found*: the
planner fetches ``[start, start + share)`` from the broker and ends the batch after the last
whole (shallow) message in it -- at least one message, so a batch always makes progress.  The
cost is that those bytes cross the network twice (planning and reading); without the option
every batch reads up to the latest offset and no extra fetch happens.

``commitToGroup``: each completed batch's end is written into that ZooKeeper consumer group,
for tools (ConsumerOffsetChecker, ``zkconsumer group describe``) that watch group lag.  It is a
progress report, never the resume point.  Spark calls ``commit(end)`` of batch N only once
batch N+1 has *new data* and is planned, so relying on it alone left ZooKeeper one batch behind
forever after a drain (issue 13).  The end of every completed batch is also the ``start`` that
Spark hands to `latestOffset`: Spark asks for the next end only after the batch before it is in
the commit log (a batch found uncommitted at restart is re-run first, without a
``latestOffset`` call), and on a restart ``start`` is the checkpoint's last end.  So
``latestOffset`` commits ``start`` -- after every batch, at the final check of an
``availableNow`` drain, and at a restart with no new data -- and ``commit(end)`` commits too;
both write only what changed, and never anything beyond a completed batch.

Dropped data (issue 11, Defect 1's pattern: a position advanced for data then dropped): the
offsets here advance only through Spark's offset log, from ranges fixed before they run, and
ZooKeeper only ever receives the end of a completed batch; ``read`` keeps no position of its
own.  The one place bytes are skipped on purpose is ``failOnDataLoss=false`` over a deleted
range, which is logged.

New partitions (a broker registers a topic later) start at their earliest offset.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import decode_message_set
from zkconsumer.spark.options import Offsets, ReadOptions
from zkconsumer.spark.planning import Cluster, LogRange, PartitionInfo, plan_cluster_read
from zkconsumer.spark.tasks import RangePartition, read_partition

__all__ = ["Kafka07StreamReader", "RefusedStreamReader", "share_budget"]

log = logging.getLogger(__name__)
_LEN = struct.Struct(">i")


def share_budget(backlog: dict[str, int], budget: int) -> dict[str, int]:
    """Split ``budget`` bytes over partitions in proportion to their backlog (at least 1 each
    partition with a backlog, never more than its backlog)."""
    total = sum(backlog.values())
    if total <= budget:
        return dict(backlog)
    return {k: min(v, max(1, v * budget // total)) if v > 0 else 0 for k, v in backlog.items()}


class RefusedStreamReader(DataSourceStreamReader):  # type: ignore[misc]
    """A stream that cannot run (bad options, a log directory): every call raises the reason.

    Returned instead of raising from ``streamReader()`` (see `Kafka07DataSource`), so the
    query's ``start()`` fails with this `ConfigurationError`, naming what to change.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def initialOffset(self) -> dict[str, Any]:
        raise ConfigurationError(self.reason)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        raise ConfigurationError(self.reason)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        raise ConfigurationError(self.reason)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        raise ConfigurationError(self.reason)


class Kafka07StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    """Driver-side planning (one long-lived worker) and executor-side ``read``."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._target: Offsets | None = None  # frozen by prepareForTriggerAvailableNow
        self._cluster: Cluster | None = None
        self._committed: Offsets = {}  # what this process last wrote to commitToGroup
        self._unseen: set[tuple[str, str]] = set()  # checkpointed partitions not visible now

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled to executors for read(); connections stay on the driver side.
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.opts)
        return self._cluster

    def _current(self) -> tuple[dict[tuple[str, str], PartitionInfo], Offsets, Offsets]:
        """Partitions now, with their earliest and latest offsets."""
        parts = {(p.topic, p.key): p for p in self.cluster.partitions()}
        earliest: Offsets = {}
        latest: Offsets = {}
        for (topic, key), p in parts.items():
            bounds = self.cluster.boundaries(p)
            earliest.setdefault(topic, {})[key] = bounds[0]
            latest.setdefault(topic, {})[key] = bounds[-1]
        return parts, earliest, latest

    def initialOffset(self) -> dict[str, Any]:
        plan = plan_cluster_read(self.opts, self.cluster)
        return plan.start

    def prepareForTriggerAvailableNow(self) -> None:
        _, _, self._target = self._current()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        # ``start`` is the end of the last completed batch (or the initial offsets): report it.
        self._commit_group(start)
        parts, earliest, latest = self._current()
        end: Offsets = {}
        backlog: dict[str, int] = {}
        for (topic, key) in parts:
            lo = _get(start, topic, key, earliest[topic][key])
            hi = latest[topic][key]
            if self._target is not None:
                hi = min(hi, _get(self._target, topic, key, hi))
            hi = max(hi, lo)
            end.setdefault(topic, {})[key] = hi
            backlog[f"{topic}\0{key}"] = hi - lo
        # A partition that is not visible now (its broker is down, so ZooKeeper lists neither
        # it nor its topic registration) keeps its offset.  Dropping it from ``end`` would make
        # it start again at earliest when the broker comes back: every row read twice.
        for topic, offsets in start.items():
            for key, offset in offsets.items():
                if (topic, key) not in parts:
                    end.setdefault(topic, {})[key] = int(offset)
                    if (topic, key) not in self._unseen:
                        self._unseen.add((topic, key))
                        log.warning("%s/%s is in the checkpoint but not registered now (its "
                                    "broker down?): keeping its offset %s until it is back",
                                    topic, key, offset)
        if self.opts.max_bytes_per_trigger is not None:
            shares = share_budget(backlog, self.opts.max_bytes_per_trigger)
            for ident, share in shares.items():
                topic, key = ident.split("\0")
                lo = _get(start, topic, key, earliest[topic][key])
                if share < backlog[ident]:
                    end[topic][key] = self._boundary(parts[(topic, key)], lo, share)
        return end

    def _boundary(self, p: PartitionInfo, start: int, budget: int) -> int:
        """The end of the last whole message in ``[start, start + budget)`` (>= 1 message)."""
        consumer = self.cluster.consumer(p.host, p.port)
        data = consumer.fetch(p.topic, p.partition, start, max(budget, 4)).messages
        valid = decode_message_set(data, start, deep=False).valid_bytes if data else 0
        if valid:
            return start + valid
        if len(data) < 4:
            data = consumer.fetch(p.topic, p.partition, start, 4).messages
        length: int = _LEN.unpack_from(data)[0]
        return start + 4 + length

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        parts, earliest, _ = self._current()
        out: list[InputPartition] = []
        for topic, ends in end.items():
            for key, hi in ends.items():
                p = parts.get((topic, key))
                lo = _get(start, topic, key, earliest.get(topic, {}).get(key, 0))
                if hi <= lo:
                    continue
                if p is None:
                    raise ConfigurationError(f"partition {topic}/{key} is no longer registered")
                first = earliest[topic][key]
                if lo < first:
                    if self.opts.fail_on_data_loss:
                        raise ConfigurationError(
                            f"{topic}/{key}: offset {lo} was deleted (the log now starts at "
                            f"{first}); set failOnDataLoss=false to skip ahead")
                    log.warning("%s/%s: skipping deleted bytes %d..%d", topic, key, lo, first)
                    lo = first
                out.append(RangePartition(LogRange(topic, p.broker_id, p.partition, p.host,
                                                   p.port, lo, hi)))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        self._commit_group(end)

    def _commit_group(self, offsets: dict[str, Any]) -> None:
        """Write the partitions of ``offsets`` that changed since the last write to the group."""
        group = self.opts.commit_to_group
        if group is None:
            return
        changed: Offsets = {}
        for topic, parts in offsets.items():
            for key, offset in parts.items():
                if self._committed.get(topic, {}).get(key) != int(offset):
                    changed.setdefault(topic, {})[key] = int(offset)
        if not changed:
            return
        try:
            self.cluster.commit(group, changed)
        except Exception as exc:  # best effort: the checkpoint, not ZooKeeper, is the truth
            log.warning("could not commit offsets to group %s: %s", group, exc)
            return
        for topic, parts in changed.items():
            self._committed.setdefault(topic, {}).update(parts)

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def _get(offsets: dict[str, Any], topic: str, key: str, default: int) -> int:
    value = offsets.get(topic, {}).get(key)
    return default if value is None else int(value)
