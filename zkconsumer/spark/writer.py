"""``df.write.format("kafka07")``: produce a DataFrame's rows to a 0.7 topic.

Columns: ``value`` (binary or string, required; strings are sent as UTF-8), optional ``topic``
(string; falls back to the ``topic`` option) and optional ``key`` (string or binary).  0.7
messages carry no key: the key only chooses the partition, with the Scala producer's hash
(REFERENCE §4.4, §4.7), so rows with the same key land in the same partition.

Every task produces through a `zkconsumer.producer.Producer` in sync mode with **confirmed
produce** (each request is followed by an offsets request on the same connection, so a
rejected set surfaces as an error instead of vanishing -- see client/produce.py).

Grouping (issue 13: keyed writes were ~60x slower than unkeyed when they sent one confirmed
produce, and with compression one wrapper, per run of equal consecutive keys): each Arrow batch
is validated whole, then its rows are grouped by destination -- ``(topic, partition index)``
with ``default_partition(key, n)`` over the producer's current partition list of the topic,
exactly the Java-hash routing the producer (and the Scala producer) applies to one key -- and
each group is sent in pieces of at most ``batchSize`` rows, each piece one message set (one
compressed wrapper with a codec).  A piece is sent with one of its own keys, which routes it to
the partition all of its keys hash to.  Rows keep their relative order within a partition.
Unkeyed rows form one group per topic, and the producer picks a partition per piece.  If a
broker fails mid-write and the producer retries over fewer partitions, a piece is re-routed as
one unit (like a Scala ``ProducerData`` with its key).

Commit protocol: a task returns its `Kafka07CommitMessage` (rows, bytes, per-topic counts) only
after every row was confirmed; a task that fails raises and reports nothing, so the driver's
``commit()`` sees only complete tasks and no half-counted result.  **A 0.7 produce cannot be
rolled back**: the rows a failed task sent before failing stay in the topic, and Spark's retry
of that task sends them again (at-least-once; duplicates are possible).  ``abort()`` cannot
undo anything; it logs what the successful tasks had already written.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from zkconsumer.errors import ConfigurationError
from zkconsumer.producer import Producer, ProducerConfig
from zkconsumer.producer.topics import create_on_every_broker
from zkconsumer.protocol import default_partition, validate_topic
from zkconsumer.spark.options import WriteOptions

__all__ = ["Kafka07CommitMessage", "Kafka07Writer"]

log = logging.getLogger(__name__)


@dataclass
class Kafka07CommitMessage(WriterCommitMessage):  # type: ignore[misc]
    """What one successful task wrote (every row confirmed by a broker)."""

    partition_id: int
    rows: int
    bytes: int
    topics: dict[str, int] = field(default_factory=dict)


def _check_schema(schema: StructType, opts: WriteOptions) -> None:
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ConfigurationError("writing to kafka07 needs a 'value' column (binary or string)")
    if not isinstance(fields["value"], BinaryType | StringType):
        raise ConfigurationError(f"column value must be binary or string, not {fields['value']}")
    if "key" in fields and not isinstance(fields["key"], BinaryType | StringType):
        raise ConfigurationError(f"column key must be binary or string, not {fields['key']}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise ConfigurationError(f"column topic must be a string, not {fields['topic']}")
    if "topic" not in fields and opts.topic is None:
        raise ConfigurationError("option topic is required when there is no topic column")


class Kafka07Writer(DataSourceArrowWriter):  # type: ignore[misc]
    """Arrow-batch writer: one Producer per task, confirmed sync produce."""

    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        _check_schema(schema, opts)
        self.opts = opts

    def _producer(self) -> Producer:
        brokers = ",".join(f"{b}:{h}:{p}" for b, (h, p) in self.opts.brokers.items())
        return Producer(ProducerConfig(
            zk_connect=self.opts.zk_connect, broker_list=brokers or None,
            producer_type="sync", confirm=True, compression_codec=self.opts.compression,
            batch_size=self.opts.batch_size, zk_security=self.opts.zk_security))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else -1
        rows = size = 0
        topics: Counter[str] = Counter()
        producer = self._producer()
        spread: set[str] = set()  # topics created on every live broker (createTopic)

        def ensure(topic: str) -> None:
            if self.opts.create_topic and topic not in spread:
                create_on_every_broker(producer, topic)  # before its first row is routed
                spread.add(topic)

        def partitions(topic: str) -> int:
            ensure(topic)
            return len(producer.partitions_for(topic))

        try:
            batches = (_validated_first(iterator, self.opts.topic) if self.opts.validate_first
                       else iterator)
            for batch in batches:
                # Validate the whole batch (null values, missing topics) before sending any of
                # it: a bad row must not leave the rows before it produced by a failing task.
                runs = _groups(batch, self.opts.topic, self.opts.batch_size, partitions)
                for topic, key, values in runs:
                    ensure(topic)
                    producer.send(topic, values, key=key)
                    rows += len(values)
                    size += sum(map(len, values))
                    topics[topic] += len(values)
            producer.flush()
        finally:
            producer.close()
        log.info("kafka07 write task %d: %d rows, %d bytes", pid, rows, size)
        return Kafka07CommitMessage(pid, rows, size, dict(topics))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, Kafka07CommitMessage)]
        log.info("kafka07 write committed: %d tasks, %d rows, %d bytes", len(done),
                 sum(m.rows for m in done), sum(m.bytes for m in done))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        done = [m for m in messages if isinstance(m, Kafka07CommitMessage)]
        log.warning(
            "kafka07 write aborted: %d of %d tasks had finished and their %d rows are in the "
            "topic(s) %s; Kafka 0.7 cannot roll a produce back, and rows of failed tasks may "
            "have been partly written", len(done), len(messages), sum(m.rows for m in done),
            dict(sum((Counter(m.topics) for m in done), Counter())))


def check_batch(batch: pa.RecordBatch, default_topic: str | None) -> None:
    """What can be known wrong before sending: a null value, a row without a topic, a topic
    name 0.7 refuses.  (Types were checked against the schema in the driver already.)"""
    columns = {f.name.lower(): batch.column(i) for i, f in enumerate(batch.schema)}
    values = columns["value"]
    if values.null_count:
        row = pc.index(pc.is_null(values), True).as_py()
        raise ConfigurationError(f"row {row} of a batch has a null value: 0.7 messages "
                                 "cannot be null (filter or coalesce it first)")
    topics = columns.get("topic")
    if topics is None:
        return
    if topics.null_count and default_topic is None:
        row = pc.index(pc.is_null(topics), True).as_py()
        raise ConfigurationError(f"row {row} has no topic and option topic is not set")
    for topic in pc.unique(topics.drop_null()).to_pylist():
        try:
            validate_topic(topic)
        except ValueError as exc:
            raise ConfigurationError(f"column topic: {exc}") from exc


def _validated_first(iterator: Iterator[pa.RecordBatch], default_topic: str | None
                     ) -> Iterator[pa.RecordBatch]:
    """``validateFirst``: every batch of the task checked before the first is handed on.

    The batches are spooled to a local Arrow file (memory stays bounded: the file is mapped,
    not loaded) while `check_batch` runs; only when all passed are they read back and sent.
    So a bad row fails its task before the task sent anything.  Costs one local write and
    read of the task's data.
    """
    with tempfile.TemporaryDirectory(prefix="zkconsumer-write-") as tmp:
        path = os.path.join(tmp, "task.arrow")
        sink = None
        writer = None
        try:
            for batch in iterator:
                check_batch(batch, default_topic)
                if writer is None:
                    sink = pa.OSFile(path, "wb")
                    writer = pa.ipc.new_stream(sink, batch.schema)
                writer.write_batch(batch)
        finally:
            if writer is not None:
                writer.close()
            if sink is not None:
                sink.close()
        if writer is None:
            return
        with pa.memory_map(path) as source:
            yield from pa.ipc.open_stream(source)


def _column(batch: pa.RecordBatch, name: str) -> list[object] | None:
    for i, f in enumerate(batch.schema):
        if f.name.lower() == name:
            return batch.column(i).to_pylist()  # type: ignore[no-any-return]
    return None


Group = tuple[str, "str | bytes | None", list[bytes]]


@functools.lru_cache(maxsize=1 << 16)
def _partition_of(key: str | bytes, n: int) -> int:
    """``default_partition`` (Java hash, per UTF-16 unit in Python: microseconds per key),
    remembered across the batches of a task, which mostly repeat the same keys."""
    return default_partition(key, n) if n > 0 else 0


def _groups(batch: pa.RecordBatch, default_topic: str | None, limit: int,
            partition_count: Callable[[str], int]) -> list[Group]:
    """The batch's rows as ``(topic, routing key, payloads)`` sends, grouped by destination.

    Every row is checked before anything is returned (a bad row fails the whole batch).  Keyed
    rows are grouped by ``(topic, default_partition(key, n))`` with ``n`` from
    ``partition_count(topic)`` (asked once per topic), unkeyed rows by topic; each group keeps
    row order and is cut into pieces of at most ``limit`` rows.  The routing key of a piece is
    a key of the group, which hashes to the same partition as all the others.
    """
    check_batch(batch, default_topic)
    groups = _arrow_groups(batch, default_topic, partition_count)
    if groups is None:
        groups = _python_groups(batch, default_topic, partition_count)
    return [(topic, key, payloads[j:j + limit]) for topic, key, payloads in groups
            for j in range(0, len(payloads), max(1, limit))]


def _arrow_groups(batch: pa.RecordBatch, default_topic: str | None,
                  partition_count: Callable[[str], int]) -> list[Group] | None:
    """`_groups` in Arrow compute for the common case -- one topic (no topic column), no null
    value -- hashing each *distinct* key once; None for any other batch (the row-by-row
    `_python_groups` then does the work and names a bad row)."""
    columns = {f.name.lower(): batch.column(i) for i, f in enumerate(batch.schema)}
    values = columns.get("value")
    if "topic" in columns or default_topic is None or values is None or values.null_count:
        return None
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        values = values.cast(pa.binary())  # strings: their UTF-8 bytes, as the row path sends
    keys = columns.get("key")
    if keys is None or keys.null_count == len(keys):
        return [(default_topic, None, values.to_pylist())]
    encoded = keys.dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    n = partition_count(default_topic)
    parts = [_partition_of(k, n) for k in distinct]
    row_parts = pc.take(pa.array(parts, pa.int32()), encoded.indices)  # null for a null key
    out: list[Group] = []
    if keys.null_count:
        out.append((default_topic, None, values.filter(pc.is_null(row_parts)).to_pylist()))
    for part in sorted(set(parts)):
        selected = values.filter(pc.equal(row_parts, part))  # keeps row order; drops nulls
        if len(selected):
            out.append((default_topic, distinct[parts.index(part)], selected.to_pylist()))
    return out


def _python_groups(batch: pa.RecordBatch, default_topic: str | None,
                   partition_count: Callable[[str], int]) -> list[Group]:
    """`_groups` row by row, without the cut into pieces: any batch, bad rows named."""
    values = _column(batch, "value") or []
    topics = _column(batch, "topic")
    keys = _column(batch, "key")
    counts: dict[str, int] = {}
    index_of: dict[tuple[str, str | bytes], int] = {}
    groups: dict[tuple[str, int], tuple[str | bytes | None, list[bytes]]] = {}
    for i, value in enumerate(values):
        if value is None:
            raise ConfigurationError(f"row {i} of a batch has a null value: 0.7 messages "
                                     "cannot be null (filter or coalesce it first)")
        topic = topics[i] if topics is not None and topics[i] is not None else default_topic
        if not isinstance(topic, str):
            raise ConfigurationError(f"row {i} has no topic and option topic is not set")
        payload = value.encode("utf-8") if isinstance(value, str) else value
        if not isinstance(payload, bytes):
            raise ConfigurationError(f"row {i}: value of type {type(value).__name__}")
        key = keys[i] if keys is not None else None
        if isinstance(key, str | bytes):
            index = index_of.get((topic, key))
            if index is None:
                n = counts.get(topic)
                if n is None:
                    n = counts[topic] = partition_count(topic)
                index = index_of[(topic, key)] = _partition_of(key, n)
            group = groups.get((topic, index))
            if group is None:
                group = groups[(topic, index)] = (key, [])
        else:
            group = groups.get((topic, -1))
            if group is None:
                group = groups[(topic, -1)] = (None, [])
        group[1].append(payload)
    return [(topic, key, payloads) for (topic, _), (key, payloads) in groups.items()]
