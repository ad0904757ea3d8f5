"""Plan a read: which partitions, which byte ranges, cut at segment boundaries (no pyspark).

Job: turn validated `ReadOptions` into a frozen list of byte ranges, one Spark task each.

* **Live cluster.** Partitions come from ZooKeeper (``/brokers/topics/<t>/<b>`` = count on
  broker b, ``/brokers/ids/<b>`` = its address) or from the ``brokers`` option.  One offsets
  request per partition, ``(LATEST_TIME, max=N)``, answers the flushed end followed by every
  segment start, descending (REFERENCE §4.3): that gives earliest, latest and the segment
  boundaries in one round trip.  The end is frozen here, at planning time, so a batch read is
  a consistent snapshot however fast producers write.
* **Splits.** 0.7 has no index, so a byte range can only be cut where a message is known to
  start: segment boundaries.  A partition is cut at every boundary inside ``[start, end)`` and
  adjacent pieces are merged while they stay within ``maxSplitBytes`` -- a big partition
  spreads over several tasks, small segments do not make tiny ones.
* **Log directories.** One task per segment file (its size frozen at planning).

Invariants: every range starts on a message boundary (a segment start, or an offset the user or
a consumer group supplied); ranges of one partition are contiguous and cover exactly
``[start, end)``; a start or end outside the log fails with `ConfigurationError` naming the
option, unless ``failOnDataLoss=false`` (then it is clamped into the log with a warning).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from types import TracebackType

from zkconsumer.client import SimpleConsumer
from zkconsumer.client.logdir import discover
from zkconsumer.errors import ConfigurationError, NoBrokersAvailableError
from zkconsumer.protocol import LATEST_TIME
from zkconsumer.spark.options import EARLIEST, LATEST, Offsets, OffsetSpec, ReadOptions
from zkconsumer.zk.offsets import commit_offset, read_topic_offsets
from zkconsumer.zk.registry import read_brokers, read_topic_partitions, read_topics
from zkconsumer.zk.session import ZkSession

__all__ = [
    "BatchPlan",
    "Cluster",
    "LogRange",
    "PartitionInfo",
    "SegmentRange",
    "check_offsets_match",
    "plan_cluster_read",
    "plan_logdir_read",
    "split_range",
]

log = logging.getLogger(__name__)

#: Enough for every segment of any real partition (0.7 logs have tens, rarely thousands).
MAX_SEGMENTS = 1_000_000


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of a live cluster and the broker that holds it."""

    topic: str
    broker_id: int
    partition: int
    host: str
    port: int

    @property
    def key(self) -> str:
        return f"{self.broker_id}-{self.partition}"


@dataclass(frozen=True)
class LogRange:
    """Messages of one partition whose shallow entry starts in ``[start, end)``, via a broker."""

    topic: str
    broker_id: int
    partition: int
    host: str
    port: int
    start: int
    end: int


@dataclass(frozen=True)
class SegmentRange:
    """One segment file of a log directory, read from ``start`` up to ``end`` (offsets)."""

    topic: str
    broker_id: int | None
    partition: int
    path: str
    segment_start: int
    start: int
    end: int
    last: bool


@dataclass
class BatchPlan:
    """What a batch read will do: the ranges, and the start/end offsets they resolve to."""

    ranges: list[LogRange] = field(default_factory=list)
    start: Offsets = field(default_factory=dict)
    end: Offsets = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(r.end - r.start for r in self.ranges)


def split_range(start: int, end: int, boundaries: list[int], max_split_bytes: int
                ) -> list[tuple[int, int]]:
    """Cut ``[start, end)`` at the segment ``boundaries`` inside it, merging small pieces.

    Pieces are merged greedily while the merged piece stays <= ``max_split_bytes``; a single
    segment larger than that stays one piece (it cannot be cut: no message index in 0.7).
    """
    if end <= start:
        return []
    cuts = sorted({b for b in boundaries if start < b < end})
    pieces = list(zip([start, *cuts], [*cuts, end], strict=True))
    merged: list[tuple[int, int]] = []
    for lo, hi in pieces:
        if merged and hi - merged[-1][0] <= max_split_bytes:
            merged[-1] = (merged[-1][0], hi)
        else:
            merged.append((lo, hi))
    return merged


class Cluster:
    """Planner-side access to a live 0.7 cluster: ZooKeeper (optional) and the brokers."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._session: ZkSession | None = None
        self._consumers: dict[tuple[str, int], SimpleConsumer] = {}

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()
        self._consumers.clear()
        if self._session is not None:
            self._session.close()
            self._session = None

    @property
    def session(self) -> ZkSession:
        if self._session is None:
            if not self.opts.zk_connect:
                raise ConfigurationError("this needs the option zookeeper.connect")
            self._session = ZkSession(self.opts.zk_connect,
                                      security=self.opts.zk_security).start()
        return self._session

    def consumer(self, host: str, port: int) -> SimpleConsumer:
        key = (host, port)
        if key not in self._consumers:
            self._consumers[key] = SimpleConsumer(host, port,
                                                  socket_timeout=self.opts.socket_timeout)
        return self._consumers[key]

    def topics(self) -> list[str]:
        """The registered topics the options select; a name or pattern that selects nothing
        fails with `ConfigurationError` naming the option (ZooKeeper sources only)."""
        opts = self.opts
        topics = [t for t in read_topics(self.session) if opts.topic_matches(t)]
        if opts.pattern is not None and not topics:
            raise ConfigurationError(
                f"option pattern: no topic registered in ZooKeeper (/brokers/topics) at "
                f"{opts.zk_connect} matches {opts.pattern!r}")
        missing = [t for t in opts.topics if t not in topics]
        if opts.pattern is None and missing:
            raise ConfigurationError(
                f"option topic: {', '.join(missing)} not registered in ZooKeeper "
                f"(/brokers/topics) at {opts.zk_connect}")
        return topics

    def partitions(self, extra: Offsets | None = None) -> list[PartitionInfo]:
        """The partitions to read, sorted by (topic, broker, partition)."""
        opts = self.opts
        found: list[PartitionInfo] = []
        if opts.source == "zookeeper":
            brokers = read_brokers(self.session)
            for topic in self.topics():
                for bid, count in read_topic_partitions(self.session, topic).items():
                    info = brokers.get(bid)
                    if info is None:
                        log.warning("topic %s is registered on broker %d, which is not live",
                                    topic, bid)
                        continue
                    found += [PartitionInfo(topic, bid, p, info.host, info.port)
                              for p in range(count)]
        else:
            keys: set[tuple[str, int, int]] = {
                (t, b, p) for t in opts.topics for b in opts.brokers
                for p in range(opts.num_partitions)}
            for topic, parts in (extra or {}).items():
                if opts.topic_matches(topic):
                    keys |= {(topic, *_parse_key(k)) for k in parts}
            for topic, bid, p in keys:
                if bid not in opts.brokers:
                    raise ConfigurationError(f"offsets name broker {bid}, which is not in "
                                             f"the option brokers")
                host, port = opts.brokers[bid]
                found.append(PartitionInfo(topic, bid, p, host, port))
        if not found:
            raise NoBrokersAvailableError(
                f"no partitions found for {opts.pattern or ','.join(opts.topics)}")
        return sorted(found, key=lambda i: (i.topic, i.broker_id, i.partition))

    def boundaries(self, p: PartitionInfo) -> list[int]:
        """Segment starts and the flushed end, ascending: [earliest, ..., latest]."""
        offsets = self.consumer(p.host, p.port).offsets(p.topic, p.partition, LATEST_TIME,
                                                        MAX_SEGMENTS)
        return sorted(set(offsets)) or [0]

    def group_offsets(self, group: str, topic: str) -> dict[str, int]:
        return read_topic_offsets(self.session, group, topic)

    def commit(self, group: str, offsets: Offsets) -> None:
        for topic, parts in offsets.items():
            for key, offset in parts.items():
                commit_offset(self.session, group, topic, key, offset)


def _parse_key(key: str) -> tuple[int, int]:
    b, _, p = key.partition("-")
    return int(b), int(p)


def _pick(spec: OffsetSpec, topic: str, key: str, lo: int, hi: int, committed: int | None,
          option: str, fail_on_data_loss: bool) -> int:
    """One partition's offset for a start/end spec, checked against the log ``[lo, hi]``."""
    if spec.kind == "earliest":
        return lo
    if spec.kind == "latest":
        return hi
    value = committed if spec.kind == "group" else spec.offsets.get(topic, {}).get(key)
    if value is None:
        return lo if option == "startingOffsets" else hi
    if value in (EARLIEST, LATEST):
        return lo if value == EARLIEST else hi
    if lo <= value <= hi:
        return value
    where = f"group {spec.group}" if spec.kind == "group" else option
    message = (f"option {option}: offset {value} of {topic}/{key} (from {where}) is outside "
               f"the log [{lo}, {hi}]")
    if fail_on_data_loss:
        raise ConfigurationError(message + "; set failOnDataLoss=false to clamp it")
    log.warning("%s; clamped", message)
    return min(max(value, lo), hi)


def check_offsets_match(opts: ReadOptions, known: dict[str, set[str]], what: str) -> None:
    """Every topic and partition named in a JSON ``startingOffsets`` / ``endingOffsets`` must
    be one this read covers (``known``: topic -> partition keys): otherwise the offset would
    be ignored and the partition read from its earliest (or to its latest) offset -- a
    whole-topic re-read from a typo.  Partitions left out of the JSON still mean earliest /
    latest (documented).  ``what`` describes the read for the message.
    """
    for option, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
        topics = sorted(t for t in spec.offsets if t not in known)
        if topics:
            raise ConfigurationError(
                f"option {option} names topic(s) {', '.join(topics)} that this read does not "
                f"include ({what} reads {', '.join(sorted(known)) or 'no topic'})")
        for topic, parts in sorted(spec.offsets.items()):
            unknown = sorted(k for k in parts if k not in known[topic])
            if unknown:
                raise ConfigurationError(
                    f"option {option}: {', '.join(f'{topic}/{k}' for k in unknown)} is not a "
                    f"partition of {topic} in {what} (it has "
                    f"{', '.join(sorted(known[topic], key=_sort_key)) or 'none'})")


def _sort_key(key: str) -> tuple[int, ...]:
    return tuple(int(x) for x in key.split("-"))


def plan_cluster_read(opts: ReadOptions, cluster: Cluster) -> BatchPlan:
    """Resolve start/end offsets of every partition and cut them into `LogRange` splits."""
    extra: Offsets = {}
    for spec in (opts.starting, opts.ending):
        for topic, parts in spec.offsets.items():
            extra.setdefault(topic, {}).update(parts)
    plan = BatchPlan()
    group_cache: dict[str, dict[str, int]] = {}
    partitions = cluster.partitions(extra)
    known: dict[str, set[str]] = {}
    for p in partitions:
        known.setdefault(p.topic, set()).add(p.key)
    check_offsets_match(opts, known, "the cluster" if opts.source == "zookeeper"
                        else "the broker list")
    for p in partitions:
        bounds = cluster.boundaries(p)
        lo, hi = bounds[0], bounds[-1]
        committed = None
        if opts.starting.kind == "group":
            assert opts.starting.group is not None  # parse_read_options guarantees it
            if p.topic not in group_cache:
                group_cache[p.topic] = cluster.group_offsets(opts.starting.group, p.topic)
            committed = group_cache[p.topic].get(p.key)
        start = _pick(opts.starting, p.topic, p.key, lo, hi, committed, "startingOffsets",
                      opts.fail_on_data_loss)
        end = _pick(opts.ending, p.topic, p.key, lo, hi, None, "endingOffsets",
                    opts.fail_on_data_loss)
        if end < start:
            raise ConfigurationError(f"option endingOffsets: {p.topic}/{p.key} ends at {end}, "
                                     f"before its start {start}")
        plan.start.setdefault(p.topic, {})[p.key] = start
        plan.end.setdefault(p.topic, {})[p.key] = end
        for lo_, hi_ in split_range(start, end, bounds, opts.max_split_bytes):
            plan.ranges.append(LogRange(p.topic, p.broker_id, p.partition, p.host, p.port,
                                        lo_, hi_))
    return plan


def plan_logdir_read(opts: ReadOptions) -> tuple[list[SegmentRange], Offsets, Offsets]:
    """One `SegmentRange` per segment file under ``logDir``; plus resolved start/end offsets."""
    assert opts.log_dir is not None  # parse_read_options guarantees it
    topics = None if opts.pattern is not None or not opts.topics else opts.topics
    ranges: list[SegmentRange] = []
    starts: Offsets = {}
    ends: Offsets = {}
    plogs = [plog for plog in discover(opts.log_dir, topics=topics)
             if opts.pattern is None or opts.topic_matches(plog.topic)]
    known: dict[str, set[str]] = {}
    for plog in plogs:
        known.setdefault(plog.topic, set()).add(_logdir_key(opts, plog.partition))
    _check_logdir_keys(opts)
    check_offsets_match(opts, known, f"the log directory {opts.log_dir}")
    for plog in plogs:
        if not plog.segments:
            continue
        key = _logdir_key(opts, plog.partition)
        start = _pick(opts.starting, plog.topic, key, plog.start, plog.end, None,
                      "startingOffsets", opts.fail_on_data_loss)
        end = _pick(opts.ending, plog.topic, key, plog.start, plog.end, None,
                    "endingOffsets", opts.fail_on_data_loss)
        starts.setdefault(plog.topic, {})[key] = start
        ends.setdefault(plog.topic, {})[key] = end
        _check_gaps(plog.path, plog.gaps(), start, end, opts.fail_on_data_loss)
        for i, seg in enumerate(plog.segments):
            lo, hi = max(start, seg.start), min(end, seg.end)
            if lo < hi:
                ranges.append(SegmentRange(plog.topic, opts.broker_id, plog.partition, seg.path,
                                           seg.start, lo, hi, i == len(plog.segments) - 1))
    return ranges, starts, ends


def _logdir_key(opts: ReadOptions, partition: int) -> str:
    """``"P"``, or ``"B-P"`` when ``brokerId`` says which broker wrote the log directory."""
    return str(partition) if opts.broker_id is None else f"{opts.broker_id}-{partition}"


def _check_logdir_keys(opts: ReadOptions) -> None:
    """Offsets keys of a log-dir read must use the read's key form: ``"P"`` without
    ``brokerId``, ``"B-P"`` (B = brokerId) with it -- say which to change."""
    for option, spec in (("startingOffsets", opts.starting), ("endingOffsets", opts.ending)):
        for topic, parts in spec.offsets.items():
            for key in parts:
                broker, dash, _ = key.rpartition("-")
                if opts.broker_id is None and dash:
                    raise ConfigurationError(
                        f"option {option}: {topic}/{key} names broker {broker}, but this log "
                        f"directory read has no brokerId: set the option brokerId={broker} "
                        f"(keys 'B-P') or key the offsets by partition alone ('P')")
                if opts.broker_id is not None and (not dash or broker != str(opts.broker_id)):
                    raise ConfigurationError(
                        f"option {option}: {topic}/{key} is not a partition of broker "
                        f"{opts.broker_id} (brokerId): key it '{opts.broker_id}-P'")


def _check_gaps(path: str, gaps: list[tuple[int, int]], start: int, end: int,
                fail_on_data_loss: bool) -> None:
    """A missing segment file inside ``[start, end)`` lost data: fail (or warn), never silent."""
    lost = [(a, b) for a, b in gaps if min(a, b) < end and max(a, b) > start]
    if not lost:
        return
    detail = ", ".join(f"bytes {a}..{b} missing" if a < b
                       else f"a segment starts at {b}, inside the previous one (ends at {a})"
                       for a, b in lost)
    message = f"log directory {path} has gaps between its segment files ({detail})"
    if fail_on_data_loss:
        raise ConfigurationError(message + "; set failOnDataLoss=false to read around them")
    log.warning("%s; reading around them", message)
