"""Executors whose Python lacks our packages: the export's one line says what to do (22.16).

The issue's standalone cluster ran executors with a Python that had neither pyarrow nor
zkconsumer (the venv was activated on the driver only) and the export said just
``ModuleNotFoundError: No module named 'pyarrow'``.  Here the workers' Python is a fresh,
empty venv named by ``PYSPARK_PYTHON`` -- the user's choice, which the export respects.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.protocol import encode_message_set
from zkconsumer.protocol.logformat import segment_name

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def test_executors_without_pyarrow_are_named_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "logs" / "orders-0").mkdir(parents=True)
    (tmp_path / "logs" / "orders-0" / segment_name(0)).write_bytes(encode_message_set([b"x"]))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True, timeout=120)
    env = dict(os.environ, PYSPARK_PYTHON=str(tmp_path / "bare" / "bin" / "python"),
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "export", "--log-dir", str(tmp_path / "logs"),
         "--to", str(tmp_path / "out"), "--master", "local[1]"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("zkconsumer export: error: the Spark job failed: "
                           "ModuleNotFoundError: No module named "), last
    assert ("install zkconsumer[spark] there and point PYSPARK_PYTHON (or "
            "spark.pyspark.python) at that interpreter") in last
