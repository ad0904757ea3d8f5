"""What one Spark read task carries and how an executor reads it (batch and streaming alike).

Shared by `zkconsumer.spark.source` (batch) and `zkconsumer.spark.stream` (micro-batches), so
neither imports the other.  Everything here is what gets pickled to executors: plain values.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from zkconsumer.spark.options import ReadOptions
from zkconsumer.spark.planning import LogRange, SegmentRange
from zkconsumer.spark.reader import read_log_range, read_segment_range

__all__ = ["RangePartition", "read_partition"]


class RangePartition(InputPartition):  # type: ignore[misc]
    """One Spark task: a `LogRange` (via a broker) or a `SegmentRange` (a segment file)."""

    def __init__(self, value: LogRange | SegmentRange) -> None:
        super().__init__(value)
        self.value = value


def read_partition(opts: ReadOptions, value: LogRange | SegmentRange | None
                   ) -> Iterator[pa.RecordBatch]:
    """Executor side of batch and streaming reads (always an iterator; may be empty)."""
    if value is None:
        return iter(())
    if isinstance(value, SegmentRange):
        return read_segment_range(value, skip_corrupt=opts.skip_corrupt)
    return read_log_range(value, fetch_size=opts.fetch_size, max_fetch_size=opts.max_fetch_size,
                          socket_timeout=opts.socket_timeout)
