"""``df.write.format("kafka07")``: produce a DataFrame's rows to a 0.7 topic.

Columns: ``value`` (binary or string, required; strings are sent as UTF-8), optional ``topic``
(string; falls back to the ``topic`` option) and optional ``key`` (string or binary).  0.7
messages carry no key: the key only chooses the partition, with the Scala producer's hash
(REFERENCE §4.4, §4.7), so rows with the same key land in the same partition.

Every task produces through a `zkconsumer.producer.Producer` in sync mode with **confirmed
produce** (each request is followed by an offsets request on the same connection, so a
rejected set surfaces as an error instead of vanishing -- see client/produce.py).

Commit protocol: a task returns its `Kafka07CommitMessage` (rows, bytes, per-topic counts) only
after every row was confirmed; a task that fails raises and reports nothing, so the driver's
``commit()`` sees only complete tasks and no half-counted result.  **A 0.7 produce cannot be
rolled back**: the rows a failed task sent before failing stay in the topic, and Spark's retry
of that task sends them again (at-least-once; duplicates are possible).  ``abort()`` cannot
undo anything; it logs what the successful tasks had already written.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from zkconsumer.errors import ConfigurationError
from zkconsumer.producer import Producer, ProducerConfig
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
            batch_size=self.opts.batch_size))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Kafka07CommitMessage:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx is not None else -1
        rows = size = 0
        topics: Counter[str] = Counter()
        producer = self._producer()
        try:
            for batch in iterator:
                # Validate the whole batch (null values, missing topics) before sending any of
                # it: a bad row must not leave the rows before it produced by a failing task.
                runs = list(_runs(batch, self.opts.topic, self.opts.batch_size))
                for topic, key, values in runs:
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


def _column(batch: pa.RecordBatch, name: str) -> list[object] | None:
    for i, f in enumerate(batch.schema):
        if f.name.lower() == name:
            return batch.column(i).to_pylist()  # type: ignore[no-any-return]
    return None


def _runs(batch: pa.RecordBatch, default_topic: str | None, limit: int
          ) -> Iterator[tuple[str, str | bytes | None, list[bytes]]]:
    """Consecutive rows with the same (topic, key), at most ``limit`` per run, in row order."""
    values = _column(batch, "value") or []
    topics = _column(batch, "topic")
    keys = _column(batch, "key")
    run: list[bytes] = []
    current: tuple[str, str | bytes | None] | None = None
    for i, value in enumerate(values):
        if value is None:
            raise ConfigurationError(f"row {i} of a batch has a null value: 0.7 messages "
                                     "cannot be null (filter or coalesce it first)")
        topic = topics[i] if topics is not None and topics[i] is not None else default_topic
        if not isinstance(topic, str):
            raise ConfigurationError(f"row {i} has no topic and option topic is not set")
        key = keys[i] if keys is not None else None
        ident = (topic, key if isinstance(key, str | bytes) else None)
        payload = value.encode("utf-8") if isinstance(value, str) else value
        if not isinstance(payload, bytes):
            raise ConfigurationError(f"row {i}: value of type {type(value).__name__}")
        if ident != current or len(run) >= limit:
            if run and current is not None:
                yield current[0], current[1], run
            run, current = [], ident
        run.append(payload)
    if run and current is not None:
        yield current[0], current[1], run
