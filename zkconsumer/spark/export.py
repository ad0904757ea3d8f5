"""Drain a 0.7 topic (live cluster or a broker's log directory) into Parquet or JSON with Spark.

Job: the migration pipeline behind ``zkconsumer export``.  The plan -- every partition's start
and end byte offset -- is computed *here, in the driver*, and handed to the ``kafka07`` source
as explicit ``startingOffsets`` / ``endingOffsets`` JSON, so the export knows exactly where it
stopped without asking Spark.  After the Spark job succeeded, the end offsets it *reached* are
written to ``<DIR>/_zkconsumer_offsets.json`` (atomically: temp file + rename; Spark readers
ignore files starting with ``_``); the next export continues from there with ``--from previous``.
If the job fails, the file is not updated, so a rerun repeats the failed range (the output may
then hold part of it twice: append-only sinks cannot be rolled back either).

Invariant: a recorded end offset is always a message boundary -- the largest ``next_offset``
of the partition's rows in the files this run added (for a compressed wrapper: the wrapper's
end), or the start offset when no row was exported.  It is NOT the planned end, which may be
inside a message: a log directory's torn tail (its bytes are planned but not read) or an
``endingOffsets`` value inside a message (that message is read whole: it starts before the end).
So consecutive exports have no gap and no duplicate.

Output goes to ``<DIR>`` in append mode: every export adds part files.  The summary counts the
rows of the files this run added (Parquet footers, JSON lines), not what Spark reports, and
takes the reached end offsets from the same files (Parquet row-group statistics when a row
group holds one partition, else its four key columns; JSON: every line).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from zkconsumer.errors import ConfigurationError, ZkConsumerError
from zkconsumer.spark import FORMAT_NAME
from zkconsumer.spark.options import Offsets, ReadOptions, parse_read_options
from zkconsumer.spark.planning import Cluster, plan_cluster_read, plan_logdir_read

__all__ = ["OFFSETS_FILE", "ExportResult", "load_offsets_file", "plan_export", "reached_offsets",
           "run_export"]

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
    output_bytes: int = 0
    start: Offsets = field(default_factory=dict)
    end: Offsets = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


def load_offsets_file(path: str) -> Offsets:
    """End offsets of a previous export, or a plain ``{"topic": {"B-P": n}}`` JSON file."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"--from {path}: cannot read offsets: {exc}") from exc
    offsets = doc.get("offsets", doc) if isinstance(doc, dict) else None
    if not isinstance(offsets, dict):
        raise ConfigurationError(f"--from {path}: expected {{\"offsets\": {{topic: {{B-P: n}}}}}}")
    return offsets


def plan_export(options: Mapping[str, str]) -> tuple[ReadOptions, Offsets, Offsets, int]:
    """Resolve ``options`` to concrete start/end offsets (and the bytes between them)."""
    opts = parse_read_options(options)
    if opts.source == "logdir":
        ranges, start, end = plan_logdir_read(opts)
        return opts, start, end, sum(r.end - r.start for r in ranges)
    with Cluster(opts) as cluster:
        plan = plan_cluster_read(opts, cluster)
    return opts, plan.start, plan.end, plan.bytes


#: (topic, broker_id, partition) of an output row -> the largest next_offset seen.
_Ends = dict[tuple[str, int | None, int], int]
_KEY_COLUMNS = ("topic", "broker_id", "partition")


def _fold(ends: _Ends, key: tuple[str, int | None, int], next_offset: int) -> None:
    if next_offset > ends.get(key, -1):
        ends[key] = next_offset


def _uniform(column: Any, num_rows: int) -> tuple[bool, Any]:
    """(True, value) when a row group's statistics prove every row has that one value."""
    stats = column.statistics
    if stats is None:
        return False, None
    if stats.null_count == num_rows:
        return True, None
    if stats.has_min_max and stats.null_count == 0 and stats.min == stats.max:
        return True, stats.min
    return False, None


def _scan_parquet(path: Path, ends: _Ends) -> int:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(str(path))
    meta = pf.metadata
    index = {meta.schema.column(j).name: j for j in range(meta.num_columns)}
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        if rg.num_rows == 0:
            continue
        keys = [_uniform(rg.column(index[c]), rg.num_rows) for c in _KEY_COLUMNS]
        nxt = rg.column(index["next_offset"]).statistics
        if all(ok for ok, _ in keys) and nxt is not None and nxt.has_min_max \
                and keys[0][1] is not None and keys[2][1] is not None:
            _fold(ends, (keys[0][1], keys[1][1], keys[2][1]), nxt.max)
            continue
        table = pf.read_row_group(i, columns=[*_KEY_COLUMNS, "next_offset"])
        grouped = table.group_by(list(_KEY_COLUMNS), use_threads=False) \
            .aggregate([("next_offset", "max")])
        for row in grouped.to_pylist():
            _fold(ends, (row["topic"], row["broker_id"], row["partition"]),
                  row["next_offset_max"])
    return int(meta.num_rows)


def _scan_json(path: Path, ends: _Ends) -> int:
    rows = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            row = json.loads(line)
            rows += 1
            _fold(ends, (row["topic"], row.get("broker_id"), row["partition"]),
                  row["next_offset"])
    return rows


def _scan_output(files: list[Path], fmt: str) -> tuple[int, _Ends]:
    """Rows in the files this run added, and the largest next_offset of every partition."""
    ends: _Ends = {}
    rows = sum((_scan_parquet if fmt == "parquet" else _scan_json)(f, ends) for f in files)
    return rows, ends


def reached_offsets(start: Offsets, planned_end: Offsets, ends: _Ends) -> Offsets:
    """Per planned partition: where the next export must start (always a message boundary).

    The largest exported ``next_offset`` of the partition, else (nothing read) its start.  A
    row of a partition that is not in the plan means the output does not match the plan.
    """
    reached: Offsets = {t: dict(parts) for t, parts in start.items()}
    for (topic, broker_id, partition), next_offset in ends.items():
        key = str(partition) if broker_id is None else f"{broker_id}-{partition}"
        planned = planned_end.get(topic, {}).get(key)
        if planned is None:
            raise ZkConsumerError(f"the export wrote rows of {topic}/{key}, which is not "
                                  f"in its plan")
        if next_offset < reached[topic][key]:
            raise ZkConsumerError(f"the export of {topic}/{key} ended at {next_offset}, "
                                  f"before its start {reached[topic][key]}")
        reached[topic][key] = next_offset
    return reached


def _data_files(out: Path) -> set[Path]:
    if not out.exists():
        return set()
    return {p for p in out.rglob("*") if p.is_file() and not p.name.startswith(("_", "."))}


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
               master: str = "local[*]", progress: bool = False,
               spark: Any = None) -> ExportResult:
    """Plan, read with the ``kafka07`` source, write ``fmt`` into ``out_dir``, record offsets."""
    if fmt not in ("parquet", "json"):
        raise ConfigurationError(f"--format must be parquet or json, not {fmt!r}")
    started = time.monotonic()
    opts, start, end, nbytes = plan_export(options)
    result = ExportResult(bytes=nbytes, start=start, end=end,
                          partitions=sum(len(p) for p in end.values()))
    out = Path(out_dir)
    before = _data_files(out)
    if nbytes > 0:
        if spark is None:
            from zkconsumer.spark.session import build_session

            spark, result.startup_seconds = build_session(master, app_name="zkconsumer-export")
        reader = spark.read.format(FORMAT_NAME).options(**options)
        reader = reader.option("startingOffsets", json.dumps(start)) \
                       .option("endingOffsets", json.dumps(end))
        ticker = _Progress(spark, sys.stderr) if progress else None
        if ticker is not None:
            ticker.start()
        try:
            reader.load().write.mode("append").format(fmt).save(str(out))
        finally:
            if ticker is not None:
                ticker.stop()
    new_files = sorted(_data_files(out) - before)
    result.files = [str(f) for f in new_files]
    result.rows, ends = _scan_output(new_files, fmt)
    # Not the planned `end`: that may lie inside a message (torn tail, endingOffsets).
    result.end = end = reached_offsets(start, end, ends)
    result.bytes = nbytes = sum(end[t][k] - s for t, parts in start.items()
                                for k, s in parts.items())
    result.output_bytes = sum(f.stat().st_size for f in new_files)
    out.mkdir(parents=True, exist_ok=True)
    record = {"version": FORMAT_VERSION, "source": opts.source,
              "topics": sorted(end), "format": fmt, "start": start, "offsets": end,
              "rows": result.rows, "bytes": nbytes,
              "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    tmp = out / f".{OFFSETS_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / OFFSETS_FILE)
    result.seconds = time.monotonic() - started
    return result
