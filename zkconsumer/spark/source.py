"""The ``kafka07`` PySpark data source: batch reads (cluster or log directory), streaming, writes.

Where the code runs (PYSPARK.md §3-§5): `Kafka07DataSource` is created in a planner Python
worker, not in the user's process; ``partitions()`` runs there once, at planning time;
``read()`` runs in executor workers on pickled copies.  So everything handed to executors is a
plain picklable value (`LogRange`, `SegmentRange`, `ReadOptions`), connections are opened
inside ``read()`` and closed there, and nothing has side effects in ``__init__``.

Options are validated in ``schema()``, which Spark calls at ``.load()``: a bad value fails
there with `ConfigurationError` naming the option (wrapped by Spark in an AnalysisException).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from zkconsumer.errors import ConfigurationError
from zkconsumer.spark.options import (
    ReadOptions,
    parse_read_options,
    parse_write_options,
)
from zkconsumer.spark.planning import (
    Cluster,
    plan_cluster_read,
    plan_logdir_read,
)
from zkconsumer.spark.schema import FORMAT_NAME, SCHEMA_DDL
from zkconsumer.spark.tasks import RangePartition, read_partition

__all__ = ["Kafka07BatchReader", "Kafka07DataSource"]

log = logging.getLogger(__name__)


class Kafka07BatchReader(DataSourceReader):  # type: ignore[misc]
    """Batch read; the plan (and so the end offsets) is frozen when ``partitions()`` runs."""

    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        if self.opts.source == "logdir":
            ranges, _, _ = plan_logdir_read(self.opts)
            parts: list[InputPartition] = [RangePartition(r) for r in ranges]
        else:
            with Cluster(self.opts) as cluster:
                plan = plan_cluster_read(self.opts, cluster)
            parts = [RangePartition(r) for r in plan.ranges]
            log.info("kafka07: %d splits, %d bytes", len(parts), plan.bytes)
        # Spark needs at least one partition to run a stage; an empty one reads nothing.
        return parts or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.opts, partition.value)


class Kafka07DataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("kafka07")`` / ``readStream`` / ``df.write.format("kafka07")``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        # Called at .load(): validate now so bad options fail early, naming the option.
        # (A write never calls schema(); it validates in writer().)
        opts = parse_read_options(self.options)
        if opts.source == "zookeeper":
            # A topic name or pattern selecting nothing is a usage error: say so at .load(),
            # not as an empty result or a planning failure at the first action.
            with Cluster(opts) as cluster:
                cluster.topics()
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return Kafka07BatchReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # Never raise here: PySpark's stream runner then calls stop() on a reader it never got
        # and reports "UnboundLocalError: ... 'reader'" instead of our message.  A refused
        # reader raises the message at its first call (query start()) instead.
        from zkconsumer.spark.stream import Kafka07StreamReader, RefusedStreamReader

        try:
            opts = parse_read_options(self.options)
        except ConfigurationError as exc:
            return RefusedStreamReader(str(exc))
        if opts.source == "logdir":
            return RefusedStreamReader(
                "a log directory cannot be read as a stream (its files do not grow): read it "
                "with spark.read (batch), or stream from a live cluster with the option "
                "zookeeper.connect or brokers")
        return Kafka07StreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from zkconsumer.spark.writer import Kafka07Writer

        if overwrite:
            # Spark refuses its default mode (errorifexists) for Python data sources and names
            # Append or Overwrite: say which of the two, and that it is always needed.
            raise ConfigurationError(
                'Kafka 0.7 topics cannot be overwritten, only appended to: write with '
                '.mode("append") (always: Spark refuses its default mode, errorifexists, for '
                'this source)')
        return Kafka07Writer(parse_write_options(self.options), schema)

