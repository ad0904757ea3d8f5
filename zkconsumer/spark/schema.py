"""The ``kafka07`` format's name and row schema (no pyspark, no pyarrow: importable anywhere).

A module of its own so that the package ``zkconsumer.spark`` (which re-exports these) and the
data source modules that need them import downwards only.  `zkconsumer.spark.arrow`'s
``ARROW_SCHEMA`` is the same schema in Arrow types.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "FORMAT_NAME", "SCHEMA_DDL"]

FORMAT_NAME = "kafka07"
COLUMNS = ("topic", "broker_id", "partition", "offset", "next_offset", "value")
SCHEMA_DDL = ("topic string, broker_id int, partition int, offset long, next_offset long, "
              "value binary")
