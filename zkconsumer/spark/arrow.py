"""Arrow record batches in exactly the shape the ``kafka07`` schema demands.

Why Arrow: a data-source ``read()`` that yields `pyarrow.RecordBatch` skips Spark's per-row
conversion, 2-3x faster than tuples (PYSPARK.md §3).  Spark checks only the first batch's
schema and then streams batches through Arrow IPC, so every batch must match `ARROW_SCHEMA`
exactly: names and order of the Spark schema, ``string`` / ``int32`` / ``int64`` / ``binary``
(never ``large_binary``), all fields nullable.

Imports pyarrow only (no pyspark), so executors and the bench can use it directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

__all__ = ["ARROW_SCHEMA", "messages_to_batch"]

ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("broker_id", pa.int32()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("next_offset", pa.int64()),
    pa.field("value", pa.binary()),
])


def messages_to_batch(topic: str, broker_id: int | None, partition: int,
                      messages: Sequence[tuple[int, int, bytes]]) -> pa.RecordBatch:
    """One record batch from the codec's ``(offset, next_offset, payload)`` tuples.

    The columns are built by transposing in C (``zip(*messages)``) and converting whole
    sequences, never row by row; the constant columns are `pyarrow.repeat` scalars.  (Measured
    best-of-5 on 100-byte messages: about 100 ns per row, a quarter of the codec's decode.)
    """
    n = len(messages)
    if n:
        offsets, nexts, values = zip(*messages, strict=True)
    else:
        offsets = nexts = values = ()
    broker = (pa.nulls(n, pa.int32()) if broker_id is None
              else pa.repeat(pa.scalar(broker_id, pa.int32()), n))
    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar(topic, pa.string()), n),
        broker,
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(nexts, pa.int64()),
        pa.array(values, pa.binary()),
    ], schema=ARROW_SCHEMA)
