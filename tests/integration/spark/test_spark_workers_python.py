"""A script run as ``.venv/bin/python app.py`` (venv not activated) reads through kafka07.

Spark starts its Python workers with ``python3`` from ``PATH`` unless told otherwise; that
interpreter has neither zkconsumer nor pyarrow, so reads failed (issue 22 item 4).
`zkconsumer.spark.register` now makes the data source's workers run the script's own
interpreter when the user chose none (PYSPARK_PYTHON / spark.pyspark.python unset).
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

APP = """\
import sys
from pyspark.sql import SparkSession
import zkconsumer.spark

spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.sparkContext.setLogLevel("OFF")
zkconsumer.spark.register(spark)
rows = spark.read.format("kafka07").load(sys.argv[1]).collect()
print("values", sorted(r.value.decode() for r in rows))
spark.stop()
"""


def test_a_script_outside_an_activated_venv_reads_a_log_dir(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "orders-0").mkdir(parents=True)
    (logs / "orders-0" / segment_name(0)).write_bytes(encode_message_set([b"a", b"b", b"c"]))
    app = tmp_path / "app.py"
    app.write_text(APP)
    # as a user's shell would have it: no venv on PATH, nothing of ours in the environment
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", SPARK_LOCAL_IP="127.0.0.1")
    result = subprocess.run([sys.executable, str(app), str(logs)], env=env, cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "values ['a', 'b', 'c']" in result.stdout
