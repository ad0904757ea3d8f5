"""Arrow record batches in exactly the shape the ``kafka07`` schema demands.

Why Arrow: a data-source ``read()`` that yields `pyarrow.RecordBatch` skips Spark's per-row
conversion, 2-3x faster than tuples (PYSPARK.md §3).  Spark checks only the first batch's
schema and then streams batches through Arrow IPC, so every batch must match `ARROW_SCHEMA`
exactly: names and order of the Spark schema, ``string`` / ``int32`` / ``int64`` / ``binary``
(never ``large_binary``), all fields nullable.

Two builders: `columns_to_batches` for the fast path (a fetch decoded by
`zkconsumer.protocol.decode_batch` into int64 columns and one payload buffer: the columns are
wrapped without copying or touching a Python object per message) and `messages_to_batch` for
lists of ``(offset, next_offset, payload)`` tuples (log-directory reads).

Imports pyarrow only (no pyspark), so executors and the bench can use it directly.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence

import pyarrow as pa

from zkconsumer.protocol import MessageBatch

__all__ = ["ARROW_SCHEMA", "columns_to_batches", "messages_to_batch"]

#: Most payload bytes in one ``binary`` column (int32 value offsets).
MAX_BINARY_BYTES = 2**31 - 1

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


def _constants(topic: str, broker_id: int | None, partition: int, n: int
               ) -> tuple[pa.Array, pa.Array, pa.Array]:
    broker = (pa.nulls(n, pa.int32()) if broker_id is None
              else pa.repeat(pa.scalar(broker_id, pa.int32()), n))
    return (pa.repeat(pa.scalar(topic, pa.string()), n), broker,
            pa.repeat(pa.scalar(partition, pa.int32()), n))


def columns_to_batches(topic: str, broker_id: int | None, partition: int, batch: MessageBatch,
                       count: int | None = None,
                       max_bytes: int = MAX_BINARY_BYTES) -> Iterator[pa.RecordBatch]:
    """Record batches of the first ``count`` (default: all) messages of ``batch``.

    Zero-copy where Arrow allows: the offset columns and the payload buffer are wrapped as
    they are (``batch.value_offsets`` is Arrow's ``large_binary`` offsets layout); only the
    value offsets are narrowed to int32, because Spark takes ``binary``, never
    ``large_binary``.  Usually one batch; more only if the payloads exceed ``max_bytes``
    (a ``binary`` column's limit), each then holding at least one message.
    """
    n = len(batch) if count is None else count
    ends = batch.value_offsets
    offsets = pa.Array.from_buffers(pa.int64(), len(batch), [None, pa.py_buffer(batch.offsets)])
    nexts = pa.Array.from_buffers(pa.int64(), len(batch),
                                  [None, pa.py_buffer(batch.next_offsets)])
    values = pa.Array.from_buffers(pa.large_binary(), len(batch),
                                   [None, pa.py_buffer(ends), pa.py_buffer(batch.values)])
    i = 0
    while i < n:
        # the largest j with ends[j] - ends[i] <= max_bytes, and at least one message
        j = min(n, max(i + 1, bisect_right(ends, ends[i] + max_bytes, i, n + 1) - 1))
        yield pa.RecordBatch.from_arrays([
            *_constants(topic, broker_id, partition, j - i),
            offsets.slice(i, j - i),
            nexts.slice(i, j - i),
            values.slice(i, j - i).cast(pa.binary()),
        ], schema=ARROW_SCHEMA)
        i = j
