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
* a record **written on target** (no provenance headers: producers that moved already) is
  pending unless a bridge copied it into 0.7 and the group read it there
  (`zkconsumer.mirror.bridged`, from the bridge's checkpoints in ZooKeeper);
* per target partition, the translated offset is that of the **first pending record**; with
  none, the partition's end (the consumer sees only what comes next).  Nothing pending is
  ever skipped.  Records the group had that follow the first pending one are counted as
  ``replayed``: where one target partition holds several source partitions (``--topic-map``
  merges, ``hash``, ``round-robin``, or ``preserve`` onto fewer partitions).  With
  ``preserve`` and at least as many target partitions as source partitions (brokers x
  partitions per broker) nothing is replayed.  ``to deliver`` counts the pending records from
  the offset on, ``written on target`` those of them without provenance headers.

The reverse direction (``--reverse``, `zkconsumer.mirror.translate_reverse`) uses the same
`zkconsumer.mirror.provenance` scan.

Refusals (the plan is printed, nothing is committed, exit status 1): the 0.7 group still has
live members (``--force`` overrides: they may commit more after the translation), the
mirror has not copied a partition up to the group's committed offset (the row says how many
bytes are missing; wait for the mirror and run again), or the group stopped inside what a
bridge wrote into a 0.7 partition (let it read to the end).  The mirror's copied position is its
checkpoint on the target (exactly-once) or else its ZooKeeper offset.

Invariants: read-only unless ``apply``; the target is read with ``read_committed``; offsets
are committed for the target group in one OffsetCommit (confluent-kafka ``commit``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.bridged import BridgedView, bridged_view
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
    pending: int  # records from `offset` on that the 0.7 group had not had ("to deliver")
    replayed: int  # records from `offset` on that the 0.7 group had (merges, hash spread)
    written: int = 0  # of `pending`: records written on the target (no provenance headers)


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
    refusals: list[str] = field(default_factory=list)  # e.g. stopped inside a bridge's writes
    written: int = 0  # target records written directly on the target (no provenance headers)


def make_plan(session: ZkSession, group: str, mirror_group: str, bootstrap: str, *,
              topic_map: Mapping[str, str] | None = None,
              topics: Iterable[str] | None = None,
              checkpoint_topic: str = CHECKPOINT_TOPIC) -> Plan:
    """Compute the translation (see module docstring); reads ZooKeeper and the target."""
    from zkconsumer.mirror.reader import end_offsets

    plan = Plan(live_members=live_members_07(session, group))
    committed = read_group_offsets(session, group)
    wanted = set(topics) if topics is not None else set(committed)
    if not wanted:
        raise MirrorError(f"0.7 group {group} has no committed offsets: nothing to translate")
    mirror_zk = read_group_offsets(session, mirror_group)
    keys = {checkpoint_key(mirror_group, t, p): (t, p)
            for t in wanted for p in {*committed.get(t, {}), *mirror_zk.get(t, {})}}
    checkpoints = read_checkpoints(bootstrap, checkpoint_topic, keys)
    bridged = bridged_view(session, group, wanted, committed)
    plan.refusals += bridged.refusals
    for key, (topic, partition) in sorted(keys.items(), key=lambda kv: kv[1]):
        at = committed.get(topic, {}).get(partition)
        if at is None:
            continue
        # what a bridge wrote into 0.7 is not the mirror's to copy: it must reach the start
        at = min(at, bridged.starts.get((topic, partition), at))
        cp = checkpoints.get(key)
        mirrored = cp.offset if cp is not None and cp.offset >= 0 else \
            mirror_zk.get(topic, {}).get(partition)
        if mirrored is None or mirrored < at:
            plan.behind.append(Behind(topic, partition, at, mirrored))

    for target, sources in sorted(targets_of(wanted, topic_map or {}).items()):
        n, marks = scan_marks(bootstrap, target)
        by_partition: dict[int, list[tuple[Mark, bool]]] = {p: [] for p in range(n)}
        for m in marks:
            by_partition[m.partition].append((m, _had(m, sources, committed, bridged,
                                                      target)))
        plan.written += sum(1 for m in marks if m.source is None)
        ends = end_offsets(bootstrap, target, range(n), timeout=30)
        for p in range(n):
            start = next((m.offset for m, had in by_partition[p] if not had), None)
            if start is None:  # past the last record (tansu's high watermark may lag)
                start = max(ends[p], by_partition[p][-1][0].offset + 1 if by_partition[p] else 0)
            after = [(m, had) for m, had in by_partition[p] if m.offset >= start]
            new = [m for m, had in after if not had]
            plan.rows.append(PlanRow(target, p, start, len(new), len(after) - len(new),
                                     sum(1 for m in new if m.source is None)))
    return plan


def _had(mark: Mark, sources: set[str], committed: Mapping[str, Mapping[str, int]],
         bridged: BridgedView, target: str) -> bool:
    """Whether the 0.7 group already had the message of ``mark`` (module docstring)."""
    if mark.source is None:  # written on target: had only through a bridge
        return mark.offset < bridged.position(target, mark.partition)
    if mark.source[0] not in sources:
        return True  # another 0.7 topic's: never the group's to get
    at = committed.get(mark.source[0], {}).get(mark.source[1])
    return at is not None and mark.at < at


def format_plan(plan: Plan) -> str:
    return format_columns(
        ("target topic", "partition", "offset", "to deliver", "replayed", "written on target"),
        [(r.topic, str(r.partition), str(r.offset), str(r.pending), str(r.replayed),
          str(r.written)) for r in plan.rows])


def apply_plan(plan: Plan, bootstrap: str, target_group: str) -> None:
    """Commit the plan's offsets for ``target_group`` on the target (one OffsetCommit)."""
    from confluent_kafka import KafkaException, TopicPartition

    from zkconsumer.mirror.reader import open_reader

    consumer = open_reader(bootstrap, options={"group.id": target_group})
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
