"""``zkconsumer export``: summary, recorded end offsets (message boundaries), resume, log dirs."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from kafka07_data import ProducedCluster, Row, collect_rows, fill

from zkconsumer import cli
from zkconsumer.broker.manager import CLEAN_SHUTDOWN_FILE
from zkconsumer.protocol.logformat import segment_name

pytestmark = pytest.mark.slow


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    capsys.readouterr()
    assert cli.main(["export", *argv]) == 0
    out = capsys.readouterr().out
    match = re.search(r"exported (\d+) rows \((\d+) log bytes\) from (\d+) partitions", out)
    assert match, out
    return int(match.group(1))


def test_export_summary_offsets_file_and_resume(spark: Any, produced_cluster: ProducedCluster,
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parquet"
    zk = produced_cluster.zk_connect
    first = produced_cluster.rows()
    assert _export(capsys, "--zk", zk, "--topic", "events", "--to", str(out)) == len(first)
    record = json.loads((out / "_zkconsumer_offsets.json").read_text())
    assert record["offsets"] == produced_cluster.latest() and record["rows"] == len(first)
    assert collect_rows(spark.read.parquet(str(out))) == first

    fill(produced_cluster, 1, tag="second-")
    everything = produced_cluster.rows()
    added = _export(capsys, "--zk", zk, "--topic", "events", "--to", str(out),
                    "--from", "previous")
    assert added == len(everything) - len(first)
    assert collect_rows(spark.read.parquet(str(out))) == everything
    # nothing new: no Spark job, zero rows, offsets unchanged
    assert _export(capsys, "--zk", zk, "--topic", "events", "--to", str(out),
                   "--from", str(out / "_zkconsumer_offsets.json")) == 0
    assert json.loads((out / "_zkconsumer_offsets.json").read_text())["offsets"] == \
        produced_cluster.latest()


def _json_rows(out: Path) -> list[Row]:
    """Every row of a JSON export directory (Spark writes binary values as base64)."""
    rows = []
    for f in sorted(out.glob("part-*.json")):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            rows.append((r["topic"], r.get("broker_id"), r["partition"], r["offset"],
                         r["next_offset"], base64.b64decode(r["value"])))
    return sorted(rows)


def test_export_log_dir_with_a_torn_tail_then_resume_on_the_revived_broker(
        spark: Any, dev_broker: Any, produced_cluster: ProducedCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    broker = produced_cluster.brokers[0]
    broker.stop()
    (broker.log_dir / CLEAN_SHUTDOWN_FILE).unlink()  # a crash: the restart must recover
    last = sorted((broker.log_dir / "events-1").glob("*.kafka"))[-1]
    data = last.read_bytes()
    last.write_bytes(data[:-3])  # a crash mid-write: the last message set is cut short
    expected = [r for r in produced_cluster.rows() if r[1] == 0]
    torn_start = max(r[3] for r in expected if r[2] == 1)  # the last (snappy) wrapper
    expected = [r for r in expected if not (r[2] == 1 and r[3] == torn_start)]
    out = tmp_path / "json"
    n = _export(capsys, "--log-dir", str(broker.log_dir), "--topic", "events", "--to",
                str(out), "--format", "json", "--broker-id", "0")
    assert n == len(expected)
    df = spark.read.format("kafka07").option("brokerId", "0").load(str(broker.log_dir))
    assert collect_rows(df) == expected == _json_rows(out)
    record = json.loads((out / "_zkconsumer_offsets.json").read_text())
    # the torn tail's bytes are not exported, so they are not part of the resume point
    assert record["offsets"] == {"events": {"0-0": len(produced_cluster.logs[(0, 0)]),
                                            "0-1": torn_start}}
    assert record["bytes"] == len(produced_cluster.logs[(0, 0)]) + torn_start

    # The broker comes back (recovery truncates the torn tail), producers go on, and the
    # export continues from the log-dir export's offsets against the live cluster.
    produced_cluster.brokers[0] = dev_broker.restart(broker)
    del produced_cluster.logs[(0, 1)][torn_start:]
    del produced_cluster.payloads[(0, 1)][-4:]  # the torn snappy set held 4 messages
    fill(produced_cluster, 1, tag="after-")
    _export(capsys, "--zk", produced_cluster.zk_connect, "--topic", "events", "--to",
            str(out), "--format", "json", "--from", "previous")
    assert _json_rows(out) == produced_cluster.rows()  # every row exactly once
    assert json.loads((out / "_zkconsumer_offsets.json").read_text())["offsets"] == \
        produced_cluster.latest()


def test_until_inside_a_message_records_its_end_and_resume_has_no_gap(
        spark: Any, produced_cluster: ProducedCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = produced_cluster.rows()
    plain = [r for r in rows if r[1:3] == (0, 0)][2]  # a plain message: end = next_offset
    gzip_start = next(r for r in rows if r[1:3] == (1, 1) and b"-gzip-" in r[5])[3]
    gzip_end = max(r[4] for r in rows if r[1:3] == (1, 1) and r[3] == gzip_start)
    until = tmp_path / "until.json"
    until.write_text(json.dumps({"events": {"0-0": plain[3] + 3, "1-1": gzip_start + 10}}))
    out = tmp_path / "parquet"
    zk = produced_cluster.zk_connect
    first = [r for r in rows if (r[1:3] != (0, 0) or r[3] <= plain[3])
             and (r[1:3] != (1, 1) or r[3] <= gzip_start)]
    assert _export(capsys, "--zk", zk, "--topic", "events", "--to", str(out),
                   "--until", str(until)) == len(first)
    assert collect_rows(spark.read.parquet(str(out))) == first
    offsets = json.loads((out / "_zkconsumer_offsets.json").read_text())["offsets"]
    assert offsets == {"events": dict(produced_cluster.latest()["events"], **{
        "0-0": plain[4], "1-1": gzip_end})}  # the ends of the messages the limit cut
    _export(capsys, "--zk", zk, "--topic", "events", "--to", str(out), "--from", "previous")
    assert collect_rows(spark.read.parquet(str(out))) == rows  # no gap, no duplicate


def test_reached_offsets_and_skipped_ranges_come_from_the_task_reports() -> None:
    from zkconsumer.client.logdir import ReadIssue
    from zkconsumer.errors import ZkConsumerError
    from zkconsumer.spark.planning import LogRange, SegmentRange
    from zkconsumer.spark.report import RangeReport, ReportParam, summarize

    def log_range(p: int, lo: int, hi: int) -> LogRange:
        return LogRange("t", 0, p, "127.0.0.1", 1, lo, hi)

    def segment(lo: int, hi: int) -> SegmentRange:
        return SegmentRange("u", None, 2, f"/l/u-2/{segment_name(lo)}", lo, lo, hi, hi == 30)

    torn = ReadIssue("torn-tail", "/l/t-1/00000000000000000000.kafka", 290, 290, "10 bytes")
    planned = [log_range(0, 0, 300), log_range(0, 300, 600), log_range(1, 0, 300),
               log_range(2, 4, 8), segment(0, 10), segment(20, 30)]  # u-2: 10..20 is missing
    reports = [RangeReport("t", 0, 0, 0, 300, 2, 20),  # stopped early: inside a message
               RangeReport("t", 0, 0, 300, 600, 3, 590),
               RangeReport("t", 0, 1, 0, 300, 1, 7, (torn,)),
               RangeReport("t", 0, 2, 4, 8, 0, None),  # nothing read: stays at start
               RangeReport("u", None, 2, 0, 10, 1, 9),
               RangeReport("u", None, 2, 20, 30, 2, 30)]
    merged = ReportParam().zero({})
    for r in [*reports, reports[1]]:  # a task run twice reports the same range twice
        merged = ReportParam().addInPlace(merged, {r.key: r})
    start = {"t": {"0-0": 0, "0-1": 0, "0-2": 4}, "u": {"2": 0}}
    end = {"t": {"0-0": 600, "0-1": 300, "0-2": 8}, "u": {"2": 30}}
    summary = summarize(merged, start, end, planned)
    assert summary.rows == 9
    assert summary.reached == {"t": {"0-0": 590, "0-1": 7, "0-2": 4}, "u": {"2": 30}}
    assert [(s.kind, s.partition, s.path, s.offset, s.bytes) for s in summary.skipped] == [
        ("torn-tail", "0-1", torn.path, 290, 10),  # the bytes from the issue to the range end
        ("gap", "2", f"/l/u-2/{segment_name(20)}", 10, 10)]  # between two planned files
    with pytest.raises(ZkConsumerError, match="not in its plan"):
        summarize(merged, {"t": {"0-0": 0}}, {"t": {"0-0": 600}}, planned[:2])
    del merged[reports[1].key]  # a range nobody reported: the resume point is unknown
    with pytest.raises(ZkConsumerError, match=r"t/0-0 from offset 300 \(planned: 300..600\)"):
        summarize(merged, start, end, planned)


def test_a_failed_spark_job_becomes_one_line() -> None:
    from zkconsumer.spark.export import executor_error

    trace = ("An error occurred while calling o85.save.\n"
             ": org.apache.spark.SparkException: Job aborted due to stage failure: ... "
             "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
             '  File "/w/reader.py", line 82, in read_segment_range\n'
             "{error}\n SQLSTATE: 38000\n"
             "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(x:1)\n"
             "Caused by: java.lang.RuntimeException: x\n")
    corrupt = executor_error(RuntimeError(trace.format(
        error="zkconsumer.errors.CorruptSegmentError: CorruptMessageError: CRC mismatch in "
              "/l/t-0/00000000000000000000.kafka at file position 120 (at byte offset 120)")))
    assert str(corrupt) == (
        "corrupt log segment: CorruptMessageError: CRC mismatch in /l/t-0/0000000000000000000"
        "0.kafka at file position 120 (at byte offset 120) (--skip-corrupt skips the rest of "
        "the file, and reports it)")
    missing = executor_error(RuntimeError(trace.format(
        error="ModuleNotFoundError: No module named 'zkconsumer'")))
    assert str(missing).startswith("the Spark job failed: ModuleNotFoundError: No module "
                                   "named 'zkconsumer' (the executors' Python lacks zkconsumer")
    assert "PYSPARK_PYTHON" in str(missing) and str(missing).endswith("whole trace)")
    assert executor_error(RuntimeError("org.apache.spark.SparkException: no Python")) is None
    from zkconsumer.errors import ConfigurationError

    refused = executor_error(RuntimeError(trace.format(
        error="zkconsumer.errors.ConfigurationError: option maxSplitBytes: bad")))
    assert isinstance(refused, ConfigurationError) and str(refused) == "option maxSplitBytes: bad"
