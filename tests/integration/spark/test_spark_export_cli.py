"""``zkconsumer export``: summary, recorded end offsets, resume, and log-dir exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from kafka07_data import ProducedCluster, collect_rows, fill

from zkconsumer import cli

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


def test_export_log_dir_of_a_stopped_broker_with_a_torn_tail(
        spark: Any, produced_cluster: ProducedCluster, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    broker = produced_cluster.brokers[0]
    broker.stop()
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
    assert collect_rows(df) == expected
