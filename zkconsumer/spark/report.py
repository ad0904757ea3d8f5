"""What each task of an export read, carried back to the driver in a Spark accumulator.

Why: the export's summary (rows), its resume record (where each partition stopped) and its
list of skipped bytes (torn tails, skipped corruption, files shorter than planned) must say
what the *executors* read -- on any cluster, whatever filesystem the output is on -- without
reading the output a second time.  Each task of the ``kafka07`` read adds one `RangeReport` to
an accumulator whose id the driver puts in a Spark *local property* (`LOCAL_PROPERTY`) for the
duration of its job (`collecting`).  A read without that property (a user's own query, a
streaming batch) reports nothing and pays nothing.

Invariants
    * Reports are keyed by their range ``(topic, broker_id, partition, start, end)`` and a merge
      replaces: a task run twice (speculation, a stage recomputed after a lost executor)
      reports the same key and is not counted twice.  Spark drops the updates of failed tasks.
    * PySpark gives an accumulator only to data sources registered from the driver with
      ``spark.dataSource.register`` (`zkconsumer.spark.register`); one found by auto-discovery
      (the ``pyspark_kafka07`` module) reports nothing.  `summarize` therefore checks that the
      reports cover every planned byte and fails rather than record a wrong resume point.
    * No pyspark at import time (the driver's planning and the unit tests do not need it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from zkconsumer.client.logdir import ReadIssue
from zkconsumer.errors import ZkConsumerError
from zkconsumer.spark.options import Offsets, partition_key
from zkconsumer.spark.planning import LogRange, SegmentRange

__all__ = ["LOCAL_PROPERTY", "RangeReport", "ReportParam", "Skipped", "Summary", "collecting",
           "report_range", "summarize"]

#: Spark local property holding the id of the export's report accumulator.
LOCAL_PROPERTY = "zkconsumer.export.reportAccumulator"

RangeKey = tuple[str, "int | None", int, int, int]


class RangeReport(NamedTuple):
    """One task's range: rows read, where it stopped, and what it stepped over."""

    topic: str
    broker_id: int | None
    partition: int
    start: int
    end: int  # the planned end of the range
    rows: int
    #: Largest ``next_offset`` of the rows read (a message boundary); None if no row was read.
    next_offset: int | None
    issues: tuple[ReadIssue, ...] = ()

    @property
    def key(self) -> RangeKey:
        return (self.topic, self.broker_id, self.partition, self.start, self.end)


Reports = dict[RangeKey, RangeReport]


class ReportParam:
    """``AccumulatorParam`` (duck-typed) of a dict of reports; merging replaces per key."""

    def zero(self, value: Reports) -> Reports:
        return {}

    def addInPlace(self, value1: Reports, value2: Reports) -> Reports:  # Spark's name
        value1.update(value2)
        return value1


@contextmanager
def collecting(spark: Any) -> Iterator[Any]:
    """An accumulator the ``kafka07`` reads of this thread's jobs report into, until exit."""
    sc = spark.sparkContext
    accumulator = sc.accumulator({}, ReportParam())
    sc.setLocalProperty(LOCAL_PROPERTY, str(accumulator.aid))
    try:
        yield accumulator
    finally:
        sc.setLocalProperty(LOCAL_PROPERTY, None)


def report_range(report: RangeReport) -> None:
    """Executor side: add ``report`` to the running export's accumulator, if there is one."""
    try:
        from pyspark import TaskContext
        from pyspark.accumulators import _deserialize_accumulator
    except ImportError:  # not inside Spark (a plain Python reader)
        return
    context = TaskContext.get()
    aid = context.getLocalProperty(LOCAL_PROPERTY) if context is not None else None
    if aid is None:
        return
    # The same call PySpark makes when it unpickles an accumulator captured by a closure: the
    # worker sends every accumulator registered this way back with the task's result.
    param: Any = ReportParam()  # duck-typed AccumulatorParam: pyspark stays optional here
    accumulator: Any = _deserialize_accumulator(int(aid), {}, param)
    accumulator.add({report.key: report})


class Skipped(NamedTuple):
    """Bytes of a planned range that were not exported, and why (from a `ReadIssue`)."""

    kind: str  # "torn-tail" | "corrupt" | "gap"
    topic: str
    partition: str  # keyed like the plan: "B-P" or "P"
    path: str
    position: int  # byte position in the file where reading stopped
    offset: int  # the partition byte offset of that position
    bytes: int  # planned bytes from there to the range's end, none of them exported
    detail: str

    def describe(self) -> str:
        return (f"{self.kind} in {self.path} at position {self.position} "
                f"({self.topic}/{self.partition} offset {self.offset}): {self.bytes} bytes not "
                f"exported; {self.detail}")


@dataclass
class Summary:
    """The reports of one export, folded per partition."""

    rows: int = 0
    #: Where each planned partition stopped (a message boundary), keyed like the plan.
    reached: Offsets = field(default_factory=dict)
    #: Everything the executors stepped over, sorted by file and position.
    skipped: list[Skipped] = field(default_factory=list)


def summarize(reports: Reports, start: Offsets, end: Offsets,
              planned: Sequence[LogRange | SegmentRange]) -> Summary:
    """Fold ``reports`` over the driver's plan; fail if they do not cover its ``planned`` ranges.

    ``start``/``end`` are the plan's offsets per partition, ``planned`` its ranges.  Bytes
    between two planned ranges of a partition (a log directory missing a segment file, read
    around with ``failOnDataLoss=false``) are listed as a ``gap``.
    """
    by_partition: dict[tuple[str, str], list[RangeReport]] = {}
    for report in reports.values():
        key = partition_key(report.broker_id, report.partition)
        if key not in end.get(report.topic, {}):
            raise ZkConsumerError(f"the export read {report.topic}/{key}, which is not in "
                                  f"its plan")
        by_partition.setdefault((report.topic, key), []).append(report)
    expected: dict[tuple[str, str], list[LogRange | SegmentRange]] = {}
    for r in planned:
        expected.setdefault((r.topic, partition_key(r.broker_id, r.partition)), []).append(r)
    summary = Summary(reached={t: dict(parts) for t, parts in start.items()})
    skipped: set[Skipped] = set()
    for (topic, key), ranges in expected.items():
        got = sorted(by_partition.get((topic, key), []), key=lambda r: r.start)
        ranges.sort(key=lambda r: r.start)
        covered = ranges[0].start
        for r in ranges:
            if r.start > covered:  # a hole in the plan itself
                skipped.add(Skipped("gap", topic, key, getattr(r, "path", ""), 0, covered,
                                    r.start - covered, f"no segment file holds offsets "
                                                       f"{covered}..{r.start}"))
                covered = r.start
            for report in got:
                if report.start <= covered < report.end:
                    covered = report.end
            if covered < r.end:
                raise ZkConsumerError(
                    f"no task reported reading {topic}/{key} from offset {covered} (planned: "
                    f"{r.start}..{r.end}); the files were written, but the resume point is "
                    f"unknown, so it was not recorded (is the kafka07 source registered with "
                    f"zkconsumer.spark.register(spark)?)")
    for (topic, key), got in by_partition.items():
        lo = start[topic][key]
        for report in got:
            summary.rows += report.rows
            skipped.update(Skipped(i.kind, topic, key, i.path, i.position, i.offset,
                                   max(0, report.end - i.offset), i.detail)
                           for i in report.issues)
            if report.next_offset is not None:
                if report.next_offset < lo:
                    raise ZkConsumerError(f"the export of {topic}/{key} ended at "
                                          f"{report.next_offset}, before its start {lo}")
                summary.reached[topic][key] = max(summary.reached[topic][key],
                                                  report.next_offset)
    summary.skipped = sorted(skipped, key=lambda i: (i.path, i.position, i.kind))
    return summary
