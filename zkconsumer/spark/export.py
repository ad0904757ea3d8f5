"""Drain a 0.7 topic (live cluster or a broker's log directory) into Parquet or JSON with Spark.

Job: the migration pipeline behind ``zkconsumer export``.  The plan -- every partition's start
and end byte offset -- is computed *here, in the driver*, and handed to the ``kafka07`` source
as explicit ``startingOffsets`` / ``endingOffsets`` JSON, so the export knows exactly where it
stopped without asking Spark.  After the Spark job succeeded, those end offsets are written to
``<DIR>/_zkconsumer_offsets.json`` (atomically: temp file + rename; Spark readers ignore files
starting with ``_``); the next export continues from there with ``--from previous``.  If the
job fails, the file is not updated, so a rerun repeats the failed range (the output may then
hold part of it twice: append-only sinks cannot be rolled back either).

Output goes to ``<DIR>`` in append mode: every export adds part files.  The summary counts the
rows of the files this run added (Parquet footers, JSON lines), not what Spark reports.
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

from zkconsumer.errors import ConfigurationError
from zkconsumer.spark import FORMAT_NAME
from zkconsumer.spark.options import Offsets, ReadOptions, parse_read_options
from zkconsumer.spark.planning import Cluster, plan_cluster_read, plan_logdir_read

__all__ = ["OFFSETS_FILE", "ExportResult", "load_offsets_file", "plan_export", "run_export"]

log = logging.getLogger(__name__)

OFFSETS_FILE = "_zkconsumer_offsets.json"
FORMAT_VERSION = 1


@dataclass
class ExportResult:
    rows: int = 0
    #: Log bytes exported (sum of end - start over partitions: headers and wrappers included).
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


def _count_rows(files: list[Path], fmt: str) -> int:
    rows = 0
    for f in files:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            rows += pq.ParquetFile(str(f)).metadata.num_rows
        else:
            with open(f, "rb") as fh:
                rows += sum(1 for _ in fh)
    return rows


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
    result.rows = _count_rows(new_files, fmt)
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
