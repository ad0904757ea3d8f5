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

from typing import Any

from zkconsumer.spark.schema import COLUMNS, FORMAT_NAME, SCHEMA_DDL

__all__ = ["COLUMNS", "FORMAT_NAME", "SCHEMA_DDL", "register"]


def register(spark: Any) -> None:
    """Register the ``kafka07`` format on ``spark`` (a SparkSession) explicitly.

    Needed only when zkconsumer is not installed as a package (so the ``pyspark_kafka07``
    shim is not on the workers' path); the executors must still be able to import zkconsumer.
    """
    from zkconsumer.spark.source import Kafka07DataSource

    spark.dataSource.register(Kafka07DataSource)
