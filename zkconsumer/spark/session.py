"""A SparkSession set up the way zkconsumer's tools need it (PYSPARK.md §2, §9).

Why each setting:

* ``PYSPARK_PYTHON = sys.executable`` -- workers otherwise run ``python3`` from ``PATH``, which
  may lack pyarrow and then crash with an unhelpful "Python worker exited unexpectedly" (P2).
* ``PYTHONPATH`` gets the directory that holds the ``zkconsumer`` package -- executors must
  import it (cloudpickle pickles our classes by reference, P1).  Harmless once installed.
* ``SPARK_LOCAL_IP = 127.0.0.1`` for ``local[...]`` masters: bind to loopback (P15).
* UI off, console progress bars off (they corrupt stdout, P14), log level ERROR.
* The ``kafka07`` format is registered explicitly, so it works from a source checkout too.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import zkconsumer
from zkconsumer.spark import register

__all__ = ["build_session"]


def _prepend_env_path(var: str, entry: str) -> None:
    parts = [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    if entry not in parts:
        os.environ[var] = os.pathsep.join([entry, *parts])


def build_session(master: str = "local[*]", *, app_name: str = "zkconsumer",
                  log_level: str = "ERROR", conf: dict[str, str] | None = None
                  ) -> tuple[Any, float]:
    """Start (or reuse) a SparkSession; returns it and the seconds the start-up took."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    _prepend_env_path("PYTHONPATH", str(Path(zkconsumer.__file__).resolve().parents[1]))
    from pyspark.sql import SparkSession

    started = time.monotonic()
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines break progress output
    register(spark)
    return spark, time.monotonic() - started
