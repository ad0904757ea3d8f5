"""A SparkSession set up the way zkconsumer's tools need it (PYSPARK.md §2, §9).

Why each setting:

* ``PYSPARK_PYTHON`` and ``spark.pyspark.python`` = ``sys.executable`` unless the user set
  either -- workers otherwise run ``python3`` from ``PATH``, which may lack zkconsumer or
  pyarrow and then crash with an unhelpful "Python worker exited unexpectedly" (P2).
* ``PYTHONPATH`` gets the directory that holds the ``zkconsumer`` package -- executors must
  import it (cloudpickle pickles our classes by reference, P1).  Harmless once installed.
* ``SPARK_LOCAL_IP = 127.0.0.1`` for ``local[...]`` masters: bind to loopback (P15).
* UI off, console progress bars off (they corrupt stdout, P14), log level ERROR.
* ``spark.python.daemon.module = zkconsumer.spark.daemon`` unless set: PySpark's daemon minus
  the ``BrokenPipeError`` traceback a killed task's worker prints after a failure.
* A JVM started here gets a log4j2 configuration (root level ERROR) unless the user has one
  (``spark.driver.extraJavaOptions`` given, or a ``log4j2.properties`` /
  ``spark-defaults.conf`` in the Spark conf directory): Spark's default profile prints four
  lines of banner and a native-library warning to stderr before `setLogLevel` can act, which
  bury a command's one-line error.  Root level WARN, as Spark's default, then `setLogLevel`.
* ``conf`` (``zkconsumer export --conf KEY=VALUE``) is applied after these defaults, so it can
  override any of them.
* The ``kafka07`` format is registered explicitly, so it works from a source checkout too.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zkconsumer
from zkconsumer.extras import require
from zkconsumer.spark import PYTHON_CONF, register

__all__ = ["build_session"]

#: PySpark's worker daemon module; ours quiets a killed task's BrokenPipeError (spark/daemon.py).
DAEMON_CONF = "spark.python.daemon.module"


def _prepend_env_path(var: str, entry: str) -> None:
    parts = [p for p in os.environ.get(var, "").split(os.pathsep) if p]
    if entry not in parts:
        os.environ[var] = os.pathsep.join([entry, *parts])


#: log4j2 settings for a driver JVM this process starts (see the module docstring).
_LOG4J2 = """\
# WARN, the level Spark's PySpark-shell logic wants: equal, it prints no "Setting default..."
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
# "Unable to load native-hadoop library": every run on a machine without it
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def _quiet_jvm_conf(conf: dict[str, str]) -> dict[str, str]:
    """``spark.driver.extraJavaOptions`` pointing log4j2 at `_LOG4J2`, when that is safe."""
    from pyspark import SparkContext

    if "spark.driver.extraJavaOptions" in conf or SparkContext._active_spark_context is not None:
        return {}
    spark_home = os.environ.get("SPARK_HOME")
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(spark_home, "conf") if spark_home else None)
    if conf_dir and any(os.path.exists(os.path.join(conf_dir, name))
                        for name in ("log4j2.properties", "spark-defaults.conf")):
        return {}
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = Path(tempfile.gettempdir()) / f"zkconsumer-{uid}-log4j2.properties"
    try:
        if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J2:
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            tmp.write_text(_LOG4J2, encoding="utf-8")
            os.replace(tmp, path)
    except OSError:  # an unwritable temp dir only costs the banner
        return {}
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={path.as_uri()}"}


def build_session(master: str = "local[*]", *, app_name: str = "zkconsumer",
                  log_level: str = "ERROR", conf: dict[str, str] | None = None
                  ) -> tuple[Any, float]:
    """Start (or reuse) a SparkSession; returns it and the seconds the start-up took."""
    require("spark", "a Spark session")
    conf = dict(conf or {})
    if PYTHON_CONF not in conf and not os.environ.get("PYSPARK_PYTHON"):
        # the user chose nothing: this interpreter, for the JVM's planner workers (the
        # variable, inherited by a JVM started here) and for executors (the setting)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        conf[PYTHON_CONF] = sys.executable
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    _prepend_env_path("PYTHONPATH", str(Path(zkconsumer.__file__).resolve().parents[1]))
    from pyspark.sql import SparkSession

    started = time.monotonic()
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    conf.setdefault(DAEMON_CONF, "zkconsumer.spark.daemon")  # no BrokenPipeError traces
    for key, value in {**_quiet_jvm_conf(conf), **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines break progress output
    register(spark)
    return spark, time.monotonic() - started
