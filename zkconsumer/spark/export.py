"""Drain a 0.7 topic (live cluster or a broker's log directory) into Parquet or JSON with Spark.

Job: the migration pipeline behind ``zkconsumer export``.  The plan -- every partition's start
and end byte offset -- is computed *here, in the driver*, and handed to the ``kafka07`` source
as explicit ``startingOffsets`` / ``endingOffsets`` JSON.  Every task of the read reports what
it read (rows, the largest ``next_offset``, what it skipped) through a Spark accumulator
(`zkconsumer.spark.report`), in the same job that writes the output: nothing is read twice,
and it works for any output location and any number of executors.

After the Spark job succeeded, the end offsets it *reached* are written to
``<OUT>/_zkconsumer_offsets.json`` through the Hadoop filesystem Spark wrote the data with
(`zkconsumer.spark.hadoopfs`: local paths, ``file://``, ``hdfs://``, ``s3a://``...; atomically:
temp file + rename; Spark readers ignore files starting with ``_``); the next export continues
from there with ``--from previous``.  If the job fails, the record is not updated, so a rerun
repeats the failed range (the output may then hold part of it twice: append-only sinks cannot
be rolled back either).

Invariant: a recorded end offset is always a message boundary -- the largest ``next_offset``
of the partition's rows this run read (for a compressed wrapper: the wrapper's end), or the
start offset when no row was read.  It is NOT the planned end, which may be inside a message:
a log directory's torn tail (its bytes are planned but not read) or an ``endingOffsets`` value
inside a message (that message is read whole: it starts before the end).  So consecutive
exports have no gap and no duplicate.  Bytes skipped as corrupt (``skip_corrupt``) or missing
are *behind* the recorded offsets when later rows of the partition were read: they are listed
in the result and in the record (``skipped``), never silently passed over.

A corrupt segment without ``skip_corrupt`` (or any other error raised by our code in an
executor) fails the Spark job; `run_export` turns Spark's page of JVM and Python traces into one
`ZkConsumerError` line carrying the executor's message (file and position for a segment).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from zkconsumer.errors import ConfigurationError, ZkConsumerError
from zkconsumer.spark import FORMAT_NAME, register
from zkconsumer.spark.hadoopfs import OutputDir, read_text
from zkconsumer.spark.options import Offsets, ReadOptions, parse_read_options
from zkconsumer.spark.planning import (
    Cluster,
    LogRange,
    SegmentRange,
    plan_cluster_read,
    plan_logdir_read,
)
from zkconsumer.spark.report import Skipped, collecting, summarize

__all__ = ["OFFSETS_FILE", "ExportResult", "load_offsets", "plan_export", "run_export"]

log = logging.getLogger(__name__)

OFFSETS_FILE = "_zkconsumer_offsets.json"
FORMAT_VERSION = 1


@dataclass
class ExportResult:
    rows: int = 0
    #: Log bytes exported (sum of reached end - start over partitions: headers and wrappers
    #: included; a torn tail is not, a message crossing endingOffsets is, whole).
    bytes: int = 0
    partitions: int = 0
    seconds: float = 0.0
    startup_seconds: float = 0.0
    start: Offsets = field(default_factory=dict)
    end: Offsets = field(default_factory=dict)
    #: The qualified output location (a URI) and the record's URI inside it.
    output: str = ""
    record: str = ""
    #: Ranges the executors did not export: torn tails, skipped corruption, shrunken files.
    skipped: list[Skipped] = field(default_factory=list)


def load_offsets(spark: Any, location: str, flag: str = "--from") -> Offsets:
    """End offsets of a previous export's record, or a plain ``{"topic": {"B-P": n}}`` file.

    ``location`` is read like the output: a path or URI on the Hadoop filesystem of ``spark``.
    """
    text = read_text(spark, location)
    if text is None:
        raise ConfigurationError(f"{flag}: {location} does not exist")
    flag = flag.split()[0]  # "--from previous": the file is named below
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{flag} {location}: cannot read offsets: {exc}") from exc
    offsets = doc.get("offsets", doc) if isinstance(doc, dict) else None
    if not isinstance(offsets, dict):
        raise ConfigurationError(f"{flag} {location}: expected "
                                 f"{{\"offsets\": {{topic: {{B-P: n}}}}}}")
    return offsets


def plan_export(options: Mapping[str, str]
                ) -> tuple[ReadOptions, Offsets, Offsets, list[LogRange | SegmentRange]]:
    """Resolve ``options`` to concrete start/end offsets and the ranges between them."""
    opts = parse_read_options(options)
    if opts.source == "logdir":
        segments, start, end = plan_logdir_read(opts)
        return opts, start, end, list(segments)
    with Cluster(opts) as cluster:
        plan = plan_cluster_read(opts, cluster)
    return opts, plan.start, plan.end, list(plan.ranges)


#: The last line of a Python traceback raised by our code in an executor, as Spark relays it.
_EXECUTOR_ERROR = re.compile(r"^(?:zkconsumer\.errors\.)(\w+): (.+)$", re.MULTILINE)
#: Any Python exception line of an executor's traceback (Java lines are indented, or start
#: with a package name such as ``org.`` or with ``: ``).
_PYTHON_ERROR = re.compile(r"^(?!(?:org|java|javax|scala|py4j)\.)([A-Za-z_][\w.]*"
                           r"(?:Error|Exception|Exit)): (.+)$", re.MULTILINE)


#: An executor without the packages a kafka07 task needs (docs/spark.md, Troubleshooting).
_MISSING_ON_EXECUTOR = re.compile(r"No module named '(zkconsumer|pyarrow|pyspark)[\w.']*")


def executor_error(exc: BaseException) -> ZkConsumerError | None:
    """A failed Spark job's pages of JVM and Python traces as one line; None if none found.

    Our own errors (``zkconsumer.errors.*``) say what happened; any other Python error of an
    executor is named as it is (often the cluster's set-up: ``ModuleNotFoundError: No module
    named 'zkconsumer'`` on an executor without the package), with a pointer to ``--debug``.
    """
    text = str(exc)
    found = _EXECUTOR_ERROR.findall(text)
    if found:
        name, message = found[-1]
        if name == "CorruptSegmentError":
            return ZkConsumerError(f"corrupt log segment: {message.strip()} (--skip-corrupt "
                                   f"skips the rest of the file, and reports it)")
        if name == "ConfigurationError":  # an option the source refused when planning
            return ConfigurationError(message.strip())
        return ZkConsumerError(f"the Spark job failed: {name}: {message.strip()}")
    other = _PYTHON_ERROR.findall(text)
    if other:
        name, message = other[-1]
        missing = _MISSING_ON_EXECUTOR.search(message)
        hint = (f"the executors' Python lacks {missing.group(1)}: install zkconsumer[spark] "
                f"there and point PYSPARK_PYTHON (or spark.pyspark.python) at that "
                f"interpreter; " if name == "ModuleNotFoundError" and missing else "")
        return ZkConsumerError(f"the Spark job failed: {name}: {message.strip()} ({hint}"
                               f"--debug shows Spark's log and the whole trace)")
    return None


class _Progress(threading.Thread):
    """Polls Spark's status tracker and rewrites one progress line on ``stream``."""

    def __init__(self, spark: Any, stream: TextIO, interval: float = 0.5) -> None:
        super().__init__(name="export-progress", daemon=True)
        self.tracker = spark.sparkContext.statusTracker()
        self.stream = stream
        self.interval = interval
        self.stopped = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            done = total = 0
            for sid in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(sid)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                self.stream.write(f"\rexport: {done}/{total} tasks, "
                                  f"{time.monotonic() - self.started_at:.0f}s ")
                self.stream.flush()

    def stop(self) -> None:
        self.stopped.set()
        self.join()
        self.stream.write("\n")
        self.stream.flush()


def run_export(options: dict[str, str], out_dir: str, *, fmt: str = "parquet",
               master: str = "local[*]", progress: bool = False, spark: Any = None,
               conf: dict[str, str] | None = None) -> ExportResult:
    """Plan, read with the ``kafka07`` source, append ``fmt`` to ``out_dir``, record offsets.

    ``out_dir`` is any location Spark can write (a path or a URI); ``spark`` an existing
    session, else one is built for ``master`` with the extra Spark ``conf``.
    """
    if fmt not in ("parquet", "json"):
        raise ConfigurationError(f"--format must be parquet or json, not {fmt!r}")
    started = time.monotonic()
    startup = 0.0
    if spark is None:
        from zkconsumer.spark.session import build_session

        spark, startup = build_session(master, app_name="zkconsumer-export", conf=conf)
    out = OutputDir(spark, out_dir)  # a bad location fails before any planning
    opts, start, end, ranges = plan_export(options)
    nbytes = sum(r.end - r.start for r in ranges)
    result = ExportResult(bytes=nbytes, start=start, end=end, startup_seconds=startup,
                          partitions=sum(len(p) for p in end.values()),
                          output=out.uri, record=out.child(OFFSETS_FILE))
    reached: Offsets = {t: dict(parts) for t, parts in start.items()}
    if nbytes > 0:
        # Only a source registered from this driver gets the accumulator (report.py).
        register(spark)
        reader = spark.read.format(FORMAT_NAME).options(**options)
        reader = reader.option("startingOffsets", json.dumps(start)) \
                       .option("endingOffsets", json.dumps(end))
        ticker = _Progress(spark, sys.stderr) if progress else None
        if ticker is not None:
            ticker.start()
        try:
            with collecting(spark) as reports:
                try:
                    reader.load().write.mode("append").format(fmt).save(out.uri)
                except Exception as exc:
                    mine = executor_error(exc)
                    if mine is None:
                        raise
                    raise mine from exc
        finally:
            if ticker is not None:
                ticker.stop()
        summary = summarize(reports.value, start, end, ranges)
        result.rows, reached, result.skipped = summary.rows, summary.reached, summary.skipped
    # Not the planned `end`: that may lie inside a message (torn tail, endingOffsets).
    result.end = reached
    result.bytes = nbytes = sum(reached[t][k] - s for t, parts in start.items()
                                for k, s in parts.items())
    record = {"version": FORMAT_VERSION, "source": opts.source,
              "topics": sorted(reached), "format": fmt, "start": start, "offsets": reached,
              "rows": result.rows, "bytes": nbytes,
              "skipped": [s._asdict() for s in result.skipped],
              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    out.write_text(OFFSETS_FILE, json.dumps(record, indent=2, sort_keys=True) + "\n")
    result.seconds = time.monotonic() - started
    return result
