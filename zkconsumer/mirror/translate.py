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
  (brokers x partitions per broker) nothing is replayed.  Records without provenance headers
  were **written on the target** directly (producers that moved already): those after the
  translated offset are delivered too and counted apart (``written on target``).

The reverse direction (``--reverse``, `zkconsumer.mirror.translate_reverse`) uses the same
`zkconsumer.mirror.provenance` scan.

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
from zkconsumer.mirror.checkpoints import CHECKPOINT_TOPIC, checkpoint_key, read_checkpoints
from zkconsumer.mirror.provenance import (
    Mark,
    format_columns,
    live_members_07,
    scan_marks,
    targets_of,
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
    pending: int  # mirrored records from `offset` on that the 0.7 group had not consumed
    replayed: int  # mirrored records from `offset` on the 0.7 group had consumed (merges)
    written: int = 0  # records from `offset` on written on the target directly (no headers)


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
    written: int = 0  # target records written directly on the target (no provenance headers)


def make_plan(session: ZkSession, group: str, mirror_group: str, bootstrap: str, *,
              topic_map: Mapping[str, str] | None = None,
              topics: Iterable[str] | None = None,
              checkpoint_topic: str = CHECKPOINT_TOPIC) -> Plan:
    """Compute the translation (see module docstring); reads ZooKeeper and the target."""
    from confluent_kafka import TopicPartition

    from zkconsumer.mirror.reader import _consumer

    plan = Plan(live_members=live_members_07(session, group))
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

    for target, sources in sorted(targets_of(wanted, topic_map or {}).items()):
        n, marks = scan_marks(bootstrap, target)
        first: dict[int, int] = {}
        pending = dict.fromkeys(range(n), 0)
        for m in marks:
            if m.source is None or m.source[0] not in sources:
                continue
            at = committed.get(m.source[0], {}).get(m.source[1])
            if at is None or m.at >= at:
                pending[m.partition] += 1
                first.setdefault(m.partition, m.offset)
        by_partition: dict[int, list[Mark]] = {p: [] for p in range(n)}
        for m in marks:
            by_partition[m.partition].append(m)
        plan.written += sum(1 for m in marks if m.source is None)
        reader = _consumer(bootstrap, "read_committed", None)
        try:
            for p in range(n):
                if p in first:
                    start = first[p]
                else:
                    start = int(reader.get_watermark_offsets(TopicPartition(target, p),
                                                             timeout=30)[1])
                after = [m for m in by_partition[p] if m.offset >= start]
                written = sum(1 for m in after if m.source is None)
                plan.rows.append(PlanRow(target, p, start, pending[p],
                                         len(after) - pending[p] - written, written))
        finally:
            reader.close()
    return plan


def format_plan(plan: Plan) -> str:
    return format_columns(
        ("target topic", "partition", "offset", "to deliver", "replayed", "written on target"),
        [(r.topic, str(r.partition), str(r.offset), str(r.pending), str(r.replayed),
          str(r.written)) for r in plan.rows])


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
