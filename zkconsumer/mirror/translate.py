"""``zkconsumer mirror translate``: a 0.7 group's committed offsets as target consumer offsets.

A 0.7 group commits *byte* offsets of 0.7 partitions; a modern consumer group needs *logical*
offsets of the target's partitions.  The exactly-once mirror records every record's
provenance (headers ``zkc.source`` = ``topic/B-P``, ``zkc.offset``, ``zkc.index``; see
`zkconsumer.mirror.checkpoints`), which makes the mapping exact:

* a mirrored record is **pending** for the 0.7 group when its 0.7 offset is at or past the
  group's committed offset of its source partition (a committed offset is a shallow message
  boundary, so this is exact; a commit inside a compressed set points at the set's start and
  the whole set is pending, as the 0.7 consumer itself would replay it), or when the group
  committed nothing for that partition;
* per target partition, the translated offset is that of the **first pending record**; with
  none, the partition's end (the consumer sees only what comes next).  When one target
  partition holds several source partitions (``--topic-map`` merges, ``hash``,
  ``round-robin``, or ``preserve`` onto fewer partitions), records of other sources that the
  group had consumed may follow the first pending one: they are counted as ``replayed`` in
  the plan.  With ``preserve`` and at least as many target partitions as source partitions
  nothing is replayed.

Refusals (the plan is printed, nothing is committed, exit status 1): the 0.7 group still has
live members (``--force`` overrides: they may commit more after the translation), or the
mirror has not copied a partition up to the group's committed offset (the row says how many
bytes are missing; wait for the mirror and run again).  The mirror's copied position is its
checkpoint on the target (exactly-once) or else its ZooKeeper offset.

Invariants: read-only unless ``apply``; the target is read with ``read_committed``; offsets
are committed for the target group in one OffsetCommit (confluent-kafka ``commit``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.checkpoints import (
    CHECKPOINT_TOPIC,
    HEADER_OFFSET,
    HEADER_SOURCE,
    checkpoint_key,
    read_checkpoints,
)
from zkconsumer.zk.offsets import read_group_offsets
from zkconsumer.zk.session import ZkSession

__all__ = ["Behind", "Plan", "PlanRow", "apply_plan", "format_plan", "make_plan"]


@dataclass(frozen=True)
class PlanRow:
    """The translated start of one target partition."""

    topic: str
    partition: int
    offset: int
    pending: int  # records a consumer starting at `offset` gets that the 0.7 group had not
    replayed: int  # records after `offset` the 0.7 group had consumed (merged partitions)


@dataclass(frozen=True)
class Behind:
    """A source partition the mirror has not copied up to the group's committed offset."""

    topic: str
    partition: str
    group_offset: int
    mirrored: int | None

    def __str__(self) -> str:
        if self.mirrored is None:
            return (f"{self.topic}/{self.partition}: the mirror has copied nothing yet; the "
                    f"group is at {self.group_offset}")
        return (f"{self.topic}/{self.partition}: the mirror has copied up to {self.mirrored}, "
                f"the group is at {self.group_offset} ({self.group_offset - self.mirrored} "
                "bytes behind)")


@dataclass
class Plan:
    rows: list[PlanRow] = field(default_factory=list)
    behind: list[Behind] = field(default_factory=list)
    live_members: list[str] = field(default_factory=list)
    unmarked: int = 0  # target records without provenance headers (treated as consumed)


def _live_members(session: ZkSession, group: str) -> list[str]:
    path = f"/consumers/{group}/ids"
    return sorted(session.get_children(path)) if session.exists(path) else []


def make_plan(session: ZkSession, group: str, mirror_group: str, bootstrap: str, *,
              topic_map: Mapping[str, str] | None = None,
              topics: Iterable[str] | None = None,
              checkpoint_topic: str = CHECKPOINT_TOPIC) -> Plan:
    """Compute the translation (see module docstring); reads ZooKeeper and the target."""
    from confluent_kafka import TopicPartition

    from zkconsumer.mirror.reader import _consumer, iter_records
    from zkconsumer.mirror.targets import KafkaAdmin

    names = dict(topic_map or {})
    plan = Plan(live_members=_live_members(session, group))
    committed = read_group_offsets(session, group)
    wanted = set(topics) if topics is not None else set(committed)
    if not wanted:
        raise MirrorError(f"0.7 group {group} has no committed offsets: nothing to translate")
    mirror_zk = read_group_offsets(session, mirror_group)
    keys = {checkpoint_key(mirror_group, t, p): (t, p)
            for t in wanted for p in {*committed.get(t, {}), *mirror_zk.get(t, {})}}
    checkpoints = read_checkpoints(bootstrap, checkpoint_topic, keys)
    for key, (topic, partition) in sorted(keys.items(), key=lambda kv: kv[1]):
        at = committed.get(topic, {}).get(partition)
        if at is None:
            continue
        cp = checkpoints.get(key)
        mirrored = cp.offset if cp is not None and cp.offset >= 0 else \
            mirror_zk.get(topic, {}).get(partition)
        if mirrored is None or mirrored < at:
            plan.behind.append(Behind(topic, partition, at, mirrored))

    sources_of: dict[str, set[str]] = {}
    for topic in wanted:
        sources_of.setdefault(names.get(topic, topic), set()).add(topic)
    admin = KafkaAdmin([bootstrap], client_id="zkconsumer-mirror-translate")
    for target in sorted(sources_of):
        n = admin.partition_count(target)
        first: dict[int, int] = {}
        pending = dict.fromkeys(range(n), 0)
        consumed_after: dict[int, list[int]] = {p: [] for p in range(n)}
        for record in iter_records(bootstrap, target, dict.fromkeys(range(n), 0)):
            source, raw_offset = record.header(HEADER_SOURCE), record.header(HEADER_OFFSET)
            if source is None or raw_offset is None:
                plan.unmarked += 1
                consumed_after[record.partition].append(record.offset)
                continue
            topic, _, partition = source.decode("utf-8", "replace").rpartition("/")
            at = committed.get(topic, {}).get(partition)
            if topic not in sources_of[target] or (at is not None and int(raw_offset) < at):
                consumed_after[record.partition].append(record.offset)
                continue
            pending[record.partition] += 1
            first.setdefault(record.partition, record.offset)
        reader = _consumer(bootstrap, "read_committed", None)
        try:
            for p in range(n):
                if p in first:
                    start = first[p]
                else:
                    start = int(reader.get_watermark_offsets(TopicPartition(target, p),
                                                             timeout=30)[1])
                replayed = sum(1 for o in consumed_after[p] if o >= start)
                plan.rows.append(PlanRow(target, p, start, pending[p], replayed))
        finally:
            reader.close()
    return plan


def format_plan(plan: Plan) -> str:
    header = ("target topic", "partition", "offset", "to deliver", "replayed")
    body = [(r.topic, str(r.partition), str(r.offset), str(r.pending), str(r.replayed))
            for r in plan.rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(header)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def apply_plan(plan: Plan, bootstrap: str, target_group: str) -> None:
    """Commit the plan's offsets for ``target_group`` on the target (one OffsetCommit)."""
    from confluent_kafka import KafkaException, TopicPartition

    from zkconsumer.mirror.reader import _consumer

    consumer = _consumer(bootstrap, "read_committed", {"group.id": target_group})
    try:
        result = consumer.commit(offsets=[TopicPartition(r.topic, r.partition, r.offset)
                                          for r in plan.rows], asynchronous=False)
        failed = [tp for tp in result or () if tp.error is not None]
        if failed:
            raise MirrorError(f"committing offsets for {target_group}: {failed[0].error}")
    except KafkaException as exc:
        raise MirrorError(f"committing offsets for {target_group}: {exc.args[0].str()}") \
            from exc
    finally:
        consumer.close()
