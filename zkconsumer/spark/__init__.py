"""PySpark data source ``kafka07``: read and write Kafka 0.7 topics and broker log directories.

The only package of zkconsumer that imports pyspark, and it does so lazily: importing
``zkconsumer.spark`` (or running ``zkconsumer --help``) works without pyspark installed, so the
``zkconsumer[spark]`` extra (pyspark + pyarrow) stays optional.

* ``spark.read.format("kafka07")`` works without any registration call once zkconsumer is
  installed: the top-level module ``pyspark_kafka07`` (``zkconsumer/spark/shim/``,
  installed as a top-level module) is found by PySpark's auto-registration.  Or call
  `register(spark)` explicitly.
* Schema: ``topic string, broker_id int, partition int, offset long, next_offset long,
  value binary``.  Kafka 0.7 messages have **no key** (the producer's key only chose the
  partition), so there is no key column.  ``offset`` / ``next_offset`` are byte offsets with
  the reference semantics (REFERENCE §4.5); ``next_offset`` is what a consumer commits.

See docs/spark.md for the options.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from zkconsumer.extras import require
from zkconsumer.spark.schema import COLUMNS, FORMAT_NAME, SCHEMA_DDL

__all__ = ["COLUMNS", "FORMAT_NAME", "SCHEMA_DDL", "register", "use_this_python"]

log = logging.getLogger(__name__)

#: The Spark setting that names the Python of the workers (PYSPARK_PYTHON is its variable).
PYTHON_CONF = "spark.pyspark.python"


def register(spark: Any) -> None:
    """Register the ``kafka07`` format on ``spark`` (a SparkSession) explicitly.

    Needed only when zkconsumer is not installed as a package (so the ``pyspark_kafka07``
    shim is not on the workers' path); the executors must still be able to import zkconsumer.
    Unless the user chose the workers' Python (``PYSPARK_PYTHON`` or ``spark.pyspark.python``),
    the data source's workers run this interpreter (`use_this_python`), so a script run as
    ``.venv/bin/python app.py`` without an activated venv still finds zkconsumer there.
    """
    require("spark", "the kafka07 data source")
    use_this_python(spark)
    from zkconsumer.spark.source import Kafka07DataSource

    spark.dataSource.register(Kafka07DataSource)


def use_this_python(spark: Any) -> bool:
    """Make the Python functions created from now on (the data source's, UDFs) run on
    workers with ``sys.executable`` -- when the user set neither ``PYSPARK_PYTHON`` nor
    ``spark.pyspark.python``.  Returns whether it did.

    Why: Spark starts its Python workers with ``python3`` from ``PATH`` by default, which is
    not the venv of a script started as ``.venv/bin/python app.py``: the workers then lack
    zkconsumer (``DATA_SOURCE_NOT_FOUND``) or pyarrow (``No module named 'pyarrow'``).  Each
    Python function carries the interpreter its workers use, taken from the SparkContext when
    it is created, so setting it here covers everything registered afterwards.  Spark's
    auto-registration (``format("kafka07")`` without `register`) runs before any code of
    ours: there only ``PYSPARK_PYTHON`` helps (docs/spark.md).
    """
    if os.environ.get("PYSPARK_PYTHON"):
        return False
    try:
        sc = spark.sparkContext
        if sc.getConf().get(PYTHON_CONF):
            return False
    except Exception:  # Spark Connect: no SparkContext here; the server decides
        return False
    if getattr(sc, "pythonExec", None) != sys.executable:
        log.info("Spark Python workers will run %s (%s and PYSPARK_PYTHON unset)",
                 sys.executable, PYTHON_CONF)
        sc.pythonExec = sys.executable
    return True
