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
from zkconsumer.spark import FORMAT_NAME, SCHEMA_DDL
from zkconsumer.spark.options import (
    ReadOptions,
    parse_read_options,
    parse_write_options,
)
from zkconsumer.spark.planning import (
    Cluster,
    LogRange,
    SegmentRange,
    plan_cluster_read,
    plan_logdir_read,
)
from zkconsumer.spark.reader import read_log_range, read_segment_range

__all__ = ["Kafka07BatchReader", "Kafka07DataSource", "RangePartition"]

log = logging.getLogger(__name__)


class RangePartition(InputPartition):  # type: ignore[misc]
    """One Spark task: a `LogRange` (via a broker) or a `SegmentRange` (a segment file)."""

    def __init__(self, value: LogRange | SegmentRange) -> None:
        super().__init__(value)
        self.value = value


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


def read_partition(opts: ReadOptions, value: LogRange | SegmentRange | None
                   ) -> Iterator[pa.RecordBatch]:
    """Executor side of batch and streaming reads (always an iterator; may be empty)."""
    if value is None:
        return iter(())
    if isinstance(value, SegmentRange):
        return read_segment_range(value, skip_corrupt=opts.skip_corrupt)
    return read_log_range(value, fetch_size=opts.fetch_size, max_fetch_size=opts.max_fetch_size,
                          socket_timeout=opts.socket_timeout)


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
        from zkconsumer.spark.stream import Kafka07StreamReader

        opts = parse_read_options(self.options)
        if opts.source == "logdir":
            raise ConfigurationError("streaming reads need zookeeper.connect or brokers; "
                                     "a log directory is read in batch")
        return Kafka07StreamReader(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from zkconsumer.spark.writer import Kafka07Writer

        if overwrite:
            raise ConfigurationError(
                'Kafka 0.7 topics cannot be overwritten; use .mode("append")')
        return Kafka07Writer(parse_write_options(self.options), schema)

