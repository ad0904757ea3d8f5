"""``zkconsumer mirror verify``: did everything the group committed reach the target?

Source side: for every topic with committed offsets in the 0.7 group, every partition is read
with the 0.7 client from its earliest retained offset up to the committed offset, and the
(deep, i.e. decompressed) messages are counted.  A committed offset is always a shallow
message boundary, so "messages whose offset is below it" is exact, compressed wrappers
included.  That is precisely the range the mirror guarantees it delivered.

Target side, per target topic (after ``--topic-map``; several sources may merge into one):

* ``kafka://`` -- ``read`` (default): every partition is assigned, read from the beginning to
  its end, and counted (robust against brokers whose ListOffsets is approximate); ``offsets``:
  the sum of ``end - beginning`` offsets (cheap; exact on a real Kafka cluster without
  transactions or compaction);
* ``kafka07://`` -- every partition of the target 0.7 cluster read from earliest to end.

On a ``kafka://`` target read by ``read``, only **mirrored** records count: those with the
exactly-once mirror's provenance headers (`zkconsumer.mirror.checkpoints`).  Records without
them were **written on target** directly -- by producers that already switched, which is step
3 of the cut-over playbook -- and are counted apart (`TopicTally.direct`), so a cut-over does
not turn every row into ``EXTRA``.  ``include_direct=True`` counts them too.  A topic where no
record has headers (an ``--at-least-once`` mirror writes none) is counted whole, and
`TopicTally.headerless` says so.  ``offsets`` cannot tell them apart and counts everything.

With ``payloads=True`` both sides also build a multiset of payload digests, so a message that
is missing is found even when a duplicate elsewhere makes the counts agree.

Verdict per target topic: ``OK`` (equal), ``MISSING`` (target has fewer -- data loss, or the
mirror is still running), ``EXTRA`` (target has more -- replays after a crash, data the 0.7
retention has deleted since it was mirrored, or pre-existing data).  Run it after the mirror
stopped (its clean shutdown commits); while it runs, the target is ahead of the commits.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.checkpoints import HEADER_SOURCE
from zkconsumer.mirror.provenance import format_columns
from zkconsumer.zk.offsets import read_group_offsets
from zkconsumer.zk.registry import read_brokers, read_partition_names, read_topic_partitions
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.session import ZkSession

__all__ = ["TopicTally", "VerifyRow", "compare", "direct_notes", "format_table",
           "kafka07_counts", "kafka_counts", "source_counts"]


def _digest(value: bytes) -> bytes:
    return hashlib.blake2b(value, digest_size=16).digest()


@dataclass
class TopicTally:
    """Messages of one topic (one side), optionally with their payload digests."""

    messages: int = 0
    digests: Counter[bytes] | None = None
    partitions: dict[str, int] = field(default_factory=dict)
    direct: int = 0  # records written on target (no provenance headers), not in `messages`
    headerless: bool = False  # no record had headers: every record was counted

    def add(self, partition: str, count: int, values: Iterable[bytes] = ()) -> None:
        """Count ``count`` messages; their payloads feed the digests when those are kept."""
        if self.digests is not None:
            self.digests.update(_digest(v) for v in values)
        self.messages += count
        self.partitions[partition] = self.partitions.get(partition, 0) + count

    def absorb(self, other: TopicTally) -> None:
        """Count ``other``'s messages as this tally's own."""
        if self.digests is not None:
            self.digests.update(other.digests or ())
        for partition, count in other.partitions.items():
            self.add(partition, count)


def source_counts(session: ZkSession, group: str, *, topics: Iterable[str] | None = None,
                  payloads: bool = False, socket_timeout: float = 30.0) -> dict[str, TopicTally]:
    """Count each source topic's messages from the earliest offset to the committed one."""
    from zkconsumer.client import SimpleConsumer
    from zkconsumer.zk.paths import parse_partition_name

    committed = read_group_offsets(session, group)
    wanted = set(topics) if topics is not None else None
    brokers = read_brokers(session)
    clients: dict[int, Any] = {}
    out: dict[str, TopicTally] = {}
    try:
        for topic, offsets in sorted(committed.items()):
            if wanted is not None and topic not in wanted:
                continue
            tc = out[topic] = TopicTally(digests=Counter() if payloads else None)
            for pname, until in sorted(offsets.items()):
                broker_id, part = parse_partition_name(pname)
                info = brokers.get(broker_id)
                if info is None:
                    raise MirrorError(f"source broker {broker_id} of {topic}/{pname} is not "
                                      "registered; cannot read what was mirrored")
                client = clients.get(broker_id)
                if client is None:
                    client = clients[broker_id] = SimpleConsumer(
                        info.host, info.port, socket_timeout=socket_timeout)
                start = client.earliest_offset(topic, part)
                values: list[bytes] = []
                count = 0
                if start < until:
                    for next_fetch, batch in client.iter_batches(topic, part, start):
                        for offset, _next, value in batch:
                            if offset >= until:
                                break
                            count += 1
                            if payloads:
                                values.append(value)
                        if next_fetch >= until:
                            break
                tc.add(pname, count, values)
    finally:
        for client in clients.values():
            client.close()
    return out


def kafka_counts(bootstrap: list[str], topics: Iterable[str], *, method: str = "read",
                 payloads: bool = False, timeout: float = 600.0,
                 include_direct: bool = False) -> dict[str, TopicTally]:
    """Count messages of ``topics`` on a modern cluster (see module docstring).

    ``read`` uses a ``read_committed`` reader: what a downstream consumer of an exactly-once
    mirror sees (aborted and open transactions excluded); it counts mirrored records only
    unless ``include_direct``."""
    from confluent_kafka import TopicPartition

    from zkconsumer.mirror.reader import iter_records, open_reader
    from zkconsumer.mirror.targets import KafkaAdmin

    if method not in ("read", "offsets"):
        raise MirrorError(f"unknown count method {method!r} (read or offsets)")
    admin = KafkaAdmin(bootstrap)
    servers = ",".join(bootstrap)
    out: dict[str, TopicTally] = {}
    for topic in sorted(set(topics)):
        tc = out[topic] = TopicTally(digests=Counter() if payloads else None)
        n = admin.partition_count(topic)
        if method == "offsets" and not payloads:
            consumer = open_reader(servers)
            try:
                for p in range(n):
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                               timeout=30)
                    tc.add(str(p), high - low)
            finally:
                consumer.close()
            continue
        direct = TopicTally(digests=Counter() if payloads else None)
        for p in range(n):
            tc.partitions.setdefault(str(p), 0)
        for record in iter_records(servers, topic, dict.fromkeys(range(n), 0),
                                   timeout=timeout):
            mirrored = record.header(HEADER_SOURCE) is not None
            (tc if mirrored else direct).add(str(record.partition), 1, (record.value,))
        if include_direct or not tc.messages:
            tc.headerless = not tc.messages and bool(direct.messages)
            tc.absorb(direct)
        else:
            tc.direct = direct.messages
    return out


def kafka07_counts(zk_connect: str, topics: Iterable[str], *, payloads: bool = False,
                   socket_timeout: float = 30.0,
                   security: ZkSecurity | None = None) -> dict[str, TopicTally]:
    """Count messages of ``topics`` on a 0.7 cluster, every partition earliest to end."""
    from zkconsumer.client import SimpleConsumer
    from zkconsumer.zk.paths import parse_partition_name

    out: dict[str, TopicTally] = {}
    with ZkSession(zk_connect, security=security) as session:
        brokers = read_brokers(session)
        for topic in sorted(set(topics)):
            tc = out[topic] = TopicTally(digests=Counter() if payloads else None)
            if not read_topic_partitions(session, topic):
                continue
            for pname in read_partition_names(session, topic):
                broker_id, part = parse_partition_name(pname)
                info = brokers.get(broker_id)
                if info is None:
                    raise MirrorError(f"target broker {broker_id} of {topic} is not registered")
                with SimpleConsumer(info.host, info.port, socket_timeout=socket_timeout) as c:
                    start = c.earliest_offset(topic, part)
                    values: list[bytes] = []
                    count = 0
                    for m in c.iter_messages(topic, part, start):
                        count += 1
                        if payloads:
                            values.append(m.value)
                    tc.add(pname, count, values)
    return out


@dataclass(frozen=True)
class VerifyRow:
    target_topic: str
    source_topics: tuple[str, ...]
    source: int
    target: int
    missing_payloads: int | None  # with payloads: source digests absent from the target

    @property
    def status(self) -> str:
        if self.missing_payloads:
            return "MISSING"
        if self.target < self.source:
            return "MISSING"
        if self.target > self.source:
            return "EXTRA"
        return "OK"


def compare(source: Mapping[str, TopicTally], target: Mapping[str, TopicTally],
            topic_map: Mapping[str, str]) -> list[VerifyRow]:
    """One row per target topic (sources merged by ``topic_map``)."""
    groups: dict[str, list[str]] = {}
    for s in source:
        groups.setdefault(topic_map.get(s, s), []).append(s)
    rows: list[VerifyRow] = []
    for tgt, srcs in sorted(groups.items()):
        src_total = sum(source[s].messages for s in srcs)
        t = target.get(tgt, TopicTally())
        missing: int | None = None
        if t.digests is not None:
            want: Counter[bytes] = Counter()
            for s in srcs:
                want.update(source[s].digests or Counter())
            missing = sum((want - t.digests).values())
        rows.append(VerifyRow(tgt, tuple(sorted(srcs)), src_total, t.messages, missing))
    return rows


def direct_notes(target: Mapping[str, TopicTally]) -> list[str]:
    """What the target counts left out (records written on target) or could not tell apart."""
    notes: list[str] = []
    for topic, tally in sorted(target.items()):
        if tally.direct:
            notes.append(f"{topic}: {tally.direct} records written on target (no provenance "
                         "headers) are not counted (--include-direct-writes counts them)")
        if tally.headerless:
            notes.append(f"{topic}: no record carries provenance headers (an --at-least-once "
                         "mirror?): every record counted")
    return notes


def format_table(rows: list[VerifyRow]) -> str:
    return format_columns(
        ("source topic(s)", "target topic", "source msgs", "target msgs", "missing", "status"),
        [(",".join(r.source_topics), r.target_topic, str(r.source), str(r.target),
          "-" if r.missing_payloads is None else str(r.missing_payloads), r.status)
         for r in rows])
