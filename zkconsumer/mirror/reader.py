"""Read target partitions to their end with confluent-kafka (assigned, no consumer group).

One reader for everything that looks at what the mirror wrote: ``mirror verify``, the
exactly-once engine's checkpoint reads and claim-time scans, the tests and the benchmark.

"The end" is what a reader of the chosen isolation level can see *now*: librdkafka's
partition-EOF event, which for ``read_committed`` fires at the last stable offset (records of
open transactions are not waited for) and for ``read_uncommitted`` at the high watermark.
`read_partitions` returns once every assigned partition reported EOF after its last record.

Invariants: no consumer group is joined and no offset is committed (``group.id`` is a
throwaway name, auto-commit off); partitions are read in log order; a partition that does not
exist raises `MirrorError`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.targets import LIBRDKAFKA_LOG

__all__ = ["Record", "end_offsets", "iter_records", "open_reader", "read_partitions"]


@dataclass(frozen=True)
class Record:
    """One record as read back from the target."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None


def open_reader(bootstrap: str, isolation: str = "read_committed",
                options: Mapping[str, Any] | None = None) -> Any:
    """A confluent-kafka consumer for reading assigned partitions (no group is joined)."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"zkconsumer-reader-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
        "fetch.wait.max.ms": 50,
        "allow.auto.create.topics": False,
        "logger": LIBRDKAFKA_LOG,
    }
    conf.update(options or {})
    return Consumer(conf)


_consumer = open_reader  # the name translate.py / verify.py import


def end_offsets(bootstrap: str, topic: str, partitions: Iterable[int], *,
                timeout: float = 10.0, isolation: str = "read_committed") -> dict[int, int]:
    """``{partition: end}`` of ``topic``'s ``partitions``: for ``read_committed`` the last
    stable offset (a watermark query answers with the reader's isolation level: the end
    such a reader can reach now), for ``read_uncommitted`` the high watermark."""
    from confluent_kafka import TopicPartition

    consumer = open_reader(bootstrap, isolation)
    try:
        return {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                      timeout=timeout)[1])
                for p in partitions}
    finally:
        consumer.close()


def iter_records(bootstrap: str, topic: str, start: Mapping[int, int], *,
                 isolation: str = "read_committed", timeout: float = 120.0,
                 options: Mapping[str, Any] | None = None,
                 settled: bool = False, high_watermark: bool = False) -> Iterator[Record]:
    """Every record of ``topic``'s partitions ``start`` (``{partition: first offset}``; an
    offset below the log start means the beginning) up to the end, in log order per
    partition.  Raises `MirrorError` if the end is not reached within ``timeout`` seconds.

    ``settled``: the end is the partitions' end as a watermark query of this reader answers
    it at the call -- for a read_committed reader that is the last stable offset, not the
    high watermark (librdkafka asks with the reader's isolation level).

    ``high_watermark``: the end is the high watermark as of the call; a read_committed reader
    then waits until every transaction open below it has finished (committed or aborted), so
    nothing committed before the call is still hidden behind one when it returns."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

    if not start:
        return
    consumer = open_reader(bootstrap, isolation, options)
    try:
        consumer.assign([TopicPartition(topic, p, o if o > 0 else OFFSET_BEGINNING)
                         for p, o in start.items()])
        until: dict[int, int] = {}
        if settled or high_watermark:  # asked read_committed, a watermark query answers the LSO
            highs = (end_offsets(bootstrap, topic, start, timeout=30, isolation="read_uncommitted")
                     if high_watermark else
                     {p: int(consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                            timeout=30)[1]) for p in start})
            until = {p: high for p, high in highs.items() if high > max(0, start[p])}
        waiting = set(start)
        deadline = time.monotonic() + timeout
        while waiting or until:
            if until:
                for tp in consumer.position([TopicPartition(topic, p) for p in until]):
                    if tp.offset >= until[tp.partition]:
                        del until[tp.partition]
            if time.monotonic() > deadline:
                raise MirrorError(f"reading {topic} partitions {sorted(waiting | set(until))} "
                                  f"did not reach their end within {timeout:.0f}s")
            for msg in consumer.consume(10000, 0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        waiting.discard(msg.partition())
                        continue
                    if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                        raise MirrorError(f"target topic {topic} partition {msg.partition()} "
                                          "does not exist")
                    if err.fatal() or not err.retriable():
                        raise MirrorError(f"reading {topic}: {err.str()}")
                    continue
                waiting.add(msg.partition())
                yield Record(msg.partition(), msg.offset(), msg.key(), msg.value() or b"",
                             tuple(msg.headers() or ()))
    finally:
        consumer.close()


def read_partitions(bootstrap: str, topic: str, partitions: int, *,
                    isolation: str = "read_committed",
                    timeout: float = 120.0) -> dict[int, list[Record]]:
    """``{partition: [records in log order]}`` of every partition, from the beginning."""
    out: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    for record in iter_records(bootstrap, topic, dict.fromkeys(range(partitions), 0),
                               isolation=isolation, timeout=timeout):
        out[record.partition].append(record)
    return out
