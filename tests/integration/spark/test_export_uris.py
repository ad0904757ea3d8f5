"""``zkconsumer export --to`` as a ``file://`` URI, a relative path and an absolute path.

Each from a working directory that is not the output's parent, each followed by a
``--from previous`` run that must export exactly the new messages: the row count comes from
the executors and the offsets record lives beside the data, read and written through Spark's
Hadoop filesystem (no junk ``./file:/...`` directory, no re-export of everything).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from kafka07_data import ProducedCluster, Row, fill

from zkconsumer import cli

pytestmark = pytest.mark.slow


def _count(text: str) -> int:
    match = re.search(r"^exported (\d+) rows", text, re.MULTILINE)
    assert match, text
    return int(match.group(1))


def _export(capsys: pytest.CaptureFixture[str], *argv: str) -> int:
    capsys.readouterr()
    assert cli.main(["export", *argv]) == 0
    return _count(capsys.readouterr().out)


def _rows(out: Path) -> list[Row]:
    """The exported rows, read with pyarrow (which skips ``_*`` and ``.*`` files, as Spark)."""
    table = ds.dataset(str(out), format="parquet").to_table()
    return sorted((r["topic"], r["broker_id"], r["partition"], r["offset"], r["next_offset"],
                   r["value"]) for r in table.to_pylist())


def _record(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "_zkconsumer_offsets.json").read_text())
    return doc


def test_file_uri_from_another_directory_in_a_fresh_process_then_resume(
        spark: Any, produced_cluster: ProducedCluster, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "data" / "out"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    zk = produced_cluster.zk_connect
    first = produced_cluster.rows()
    # A fresh process (its own JVM, started in `elsewhere`), as a user runs the command.
    proc = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "export", "--zk", zk, "--topic", "events",
         "--to", out.as_uri(), "--master", "local[1]",
         "--conf", "spark.sql.parquet.compression.codec=uncompressed"],
        cwd=elsewhere, capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, PYTHONPATH=""))
    assert proc.returncode == 0, proc.stderr
    for noise in ("log4j", "Setting default log level", "NativeCodeLoader"):
        assert noise not in proc.stderr  # Spark's start-up banner is quiet (session.py)
    assert _count(proc.stdout) == len(first)
    assert f"offsets recorded in file:{out}/_zkconsumer_offsets.json" in proc.stdout
    assert list(elsewhere.iterdir()) == []  # no ./file:/... directory
    assert _record(out)["offsets"] == produced_cluster.latest()
    assert _rows(out) == first
    parts = [p.name for p in out.glob("part-*")]
    assert parts and not any(".snappy." in p for p in parts)  # --conf reached the session

    fill(produced_cluster, 1, tag="second-")
    monkeypatch.chdir(elsewhere)
    added = _export(capsys, "--zk", zk, "--topic", "events", "--to", out.as_uri(),
                    "--from", "previous")
    assert added == len(produced_cluster.rows()) - len(first)
    assert _rows(out) == produced_cluster.rows()
    assert _record(out)["offsets"] == produced_cluster.latest()


@pytest.mark.parametrize("relative", [True, False], ids=["relative", "absolute"])
def test_paths_from_another_directory_then_resume(
        relative: bool, spark: Any, produced_cluster: ProducedCluster, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = cwd / "exports" / "events" if relative else tmp_path / "abs" / "events"
    to = "exports/events" if relative else str(out)
    zk = produced_cluster.zk_connect
    first = produced_cluster.rows()
    assert _export(capsys, "--zk", zk, "--topic", "events", "--to", to) == len(first)
    assert _record(out)["offsets"] == produced_cluster.latest()
    fill(produced_cluster, 1, tag="second-")
    added = _export(capsys, "--zk", zk, "--topic", "events", "--to", to, "--from", "previous")
    assert added == len(produced_cluster.rows()) - len(first)
    assert _rows(out) == produced_cluster.rows()
    assert _record(out)["offsets"] == produced_cluster.latest()
    assert sorted(p.name for p in cwd.iterdir()) == (["exports"] if relative else [])


def test_an_unknown_scheme_or_no_previous_record_fails_in_one_line(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli.main(["export", "--log-dir", str(tmp_path), "--to", "nosuch://host/out"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("zkconsumer export: error: nosuch://host/out")
    assert "No FileSystem for scheme" in err, err
    out = tmp_path / "never-exported"
    assert cli.main(["export", "--log-dir", str(tmp_path), "--to", out.as_uri(),
                     "--from", "previous"]) == 1
    assert capsys.readouterr().err == (f"zkconsumer export: error: --from previous: file:{out}/"
                                       f"_zkconsumer_offsets.json does not exist\n")
