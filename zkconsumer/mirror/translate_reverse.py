"""``zkconsumer mirror translate --reverse``: roll a group that moved to the target back to 0.7.

The rollback of `zkconsumer.mirror.translate`: the target group G's committed offsets become
byte offsets of the 0.7 group G07, through the same provenance scan
(`zkconsumer.mirror.provenance`).  Per 0.7 partition S of G07's topics:

* a mirrored record of S is **consumed** when its target offset is below G's committed
  offset of its target partition, or when its 0.7 offset is below G07's own committed offset
  (G07 had it before it moved: merged partitions put such records after G's start), else
  **pending**;
* with a pending record, G07 resumes at the smallest 0.7 offset of a pending record of S.
  That offset is a wrapper's (a 0.7 consumer can only start at a message-set boundary), so
  the messages of that wrapper G had consumed come **again**, and -- where S was spread over
  several target partitions (``hash``, ``round-robin``) -- so do consumed records past it.
  ``again`` counts both: the plan's only duplicates; nothing pending is skipped;
* with none pending (G consumed everything of S the mirror copied), G07 resumes right after
  the last copied message: the end of its wrapper when the whole wrapper was copied (read
  from the 0.7 broker), else the wrapper's start (``again`` = what G had of it);
* with no record of S on the target past G07's offset, G consumed nothing new of it: G07's
  offset stays.

Records **written on the target** (no provenance headers: producers that switched) reach
0.7 only through a bridge (``mirror --from kafka://``).  Where one feeds the 0.7 partition
(`_Bridged`: one source partition per 0.7 partition, ``preserve``), each record below the
bridge's position is matched with the message the bridge wrote and then treated like a
mirrored one; records past it are copied when the bridge runs again (those G had consumed
count as ``again``).

Refusals (the plan is printed, nothing is written, exit status 1): G07 has live members or G
is not empty on the target (``--force`` overrides both), G has no committed offset for a
partition that holds records of G07's topics, the 0.7 broker cannot show a wrapper the plan
needs (retention deleted it), or G had not consumed records written on the target that no
bridge copies into 0.7 (or copies in a layout without a per-record map).

``apply`` writes each changed offset by compare-and-set against the znode version read for
the plan; an offset another writer moved meanwhile is reported, not overwritten backwards.
Invariants: read-only unless ``apply``; only G07's offset znodes are written.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.bridged import bridge_checkpoints
from zkconsumer.mirror.provenance import (
    Mark,
    format_columns,
    live_members_07,
    scan_marks,
    targets_of,
)
from zkconsumer.zk.offsets import commit_offset_cas, read_group_offsets, read_offset_versioned
from zkconsumer.zk.paths import BridgeCheckpoint
from zkconsumer.zk.registry import read_brokers, read_partition_names
from zkconsumer.zk.session import ZkSession

__all__ = ["ReversePlan", "ReverseRow", "apply_reverse", "format_reverse", "make_reverse_plan"]

#: consumer group states of a target group that still has (or is gaining) members
_LIVE_STATES = {"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"}


@dataclass(frozen=True)
class ReverseRow:
    """Where G07 resumes in one 0.7 partition."""

    topic: str
    partition: str  # "B-P"
    offset: int  # the new committed byte offset of G07
    current: int | None  # G07's committed offset when planned
    version: int | None  # its znode version then (None: no znode)
    pending: int  # mirrored messages of this partition G had not consumed
    again: int  # messages G had consumed that G07 gets again (wrapper start, spread sources)


@dataclass
class ReversePlan:
    rows: list[ReverseRow] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)  # why a target offset cannot be mapped
    live_members: list[str] = field(default_factory=list)  # of G07
    target_live: str | None = None  # G's state on the target when it is not empty
    written: int = 0  # records written on the target directly that G had consumed


def target_group_state(bootstrap: str, group: str) -> str:
    """The state (``STABLE``, ``EMPTY``...) of consumer group ``group`` on the target."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from zkconsumer.mirror.targets import LIBRDKAFKA_LOG

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG}
    admin = AdminClient(conf)
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result(
            timeout=20)
    except KafkaException as exc:
        raise MirrorError(f"describing target group {group}: {exc.args[0].str()}") from exc
    return str(desc.state.name)


def target_group_offsets(bootstrap: str, group: str, topic: str, n: int) -> dict[int, int]:
    """``{partition: committed offset}`` of ``group`` on the target (absent: none committed)."""
    from confluent_kafka import KafkaException, TopicPartition

    from zkconsumer.mirror.reader import open_reader

    consumer = open_reader(bootstrap, options={"group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(n)], timeout=30)
    except KafkaException as exc:
        raise MirrorError(f"reading {group}'s offsets of {topic}: {exc.args[0].str()}") \
            from exc
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


class _Wrappers:
    """Reads message sets of the 0.7 partitions from their brokers."""

    def __init__(self, session: ZkSession, socket_timeout: float = 30.0) -> None:
        self._brokers = read_brokers(session)
        self._timeout = socket_timeout

    def _batches(self, topic: str, pname: str, offset: int
                 ) -> Iterator[tuple[int, list[tuple[int, int, bytes]]]]:
        from zkconsumer.client import SimpleConsumer
        from zkconsumer.zk.paths import parse_partition_name

        broker_id, part = parse_partition_name(pname)
        info = self._brokers.get(broker_id)
        if info is None:
            raise MirrorError(f"0.7 broker {broker_id} of {topic}/{pname} is not registered")
        with SimpleConsumer(info.host, info.port, socket_timeout=self._timeout) as client:
            yield from client.iter_batches(topic, part, offset)

    def at(self, topic: str, pname: str, offset: int) -> tuple[int, int]:
        """``(messages, end offset)`` of the message set at byte ``offset``."""
        for _next_fetch, batch in self._batches(topic, pname, offset):
            inner = [nxt for off, nxt, _value in batch if off == offset]
            if inner:
                return len(inner), max(inner)
            break
        raise MirrorError(f"{topic}/{pname}: the 0.7 broker has no message set at {offset}")

    def written(self, topic: str, pname: str, cp: BridgeCheckpoint) -> list[tuple[int, int]]:
        """``(wrapper offset, index)`` of every message a bridge wrote (``cp.ranges``)."""
        out: list[tuple[int, int]] = []
        for next_fetch, batch in self._batches(topic, pname, cp.ranges[0][0]):
            for offset, _next, _value in batch:
                if offset < cp.end and cp.covers(offset):
                    same = out[-1][1] + 1 if out and out[-1][0] == offset else 0
                    out.append((offset, same))
            if next_fetch >= cp.end:
                break
        return out


class _Bridged:
    """Records written on target that a bridge copied into 0.7, as marks with 0.7 positions.

    A 0.7 partition X fed by one bridge from one source partition ``T/p`` that feeds only X
    (``preserve`` onto enough partitions) holds those records in source order: the i-th
    record of ``T/p`` below the bridge's position is the i-th message the bridge wrote into
    X.  Records at or past the position are not in 0.7 yet; the bridge copies them when it
    runs again (`later`).  Other layouts (hash, round-robin, several sources or bridges in
    one 0.7 partition) have no per-record map: the plan names them (`unmapped`) and is
    refused.  Costs one read of everything the bridge wrote into each mapped partition."""

    def __init__(self, session: ZkSession, wrappers: _Wrappers, sources: set[str],
                 target: str, marks: list[Mark], unmapped: list[str]) -> None:
        self.marks: dict[tuple[int, int], Mark] = {}
        self.later: dict[int, tuple[str, str]] = {}  # target partition -> (S, X)
        self.again: dict[tuple[str, str], int] = {}  # G had them; the bridge brings them
        for topic in sorted(sources):
            feeds: dict[str, list[str]] = {}
            written = bridge_checkpoints(session, topic)
            for pname, cps in written.items():
                for key in cps[0][1].sources:
                    feeds.setdefault(key, []).append(pname)
            for pname, cps in sorted(written.items()):
                keys = [k for k in cps[0][1].sources if k.rpartition("/")[0] == target]
                if not keys:
                    continue
                if len(cps) > 1 or len(keys) > 1 or len(feeds[keys[0]]) > 1:
                    unmapped.append(f"{topic}/{pname}: bridged from {', '.join(keys)} in a "
                                    "layout without a per-record map (several bridges, "
                                    "sources or partitions)")
                    continue
                self._map(wrappers, topic, pname, cps[0][1], keys[0], marks, unmapped)

    def _map(self, wrappers: _Wrappers, topic: str, pname: str, cp: BridgeCheckpoint,
             key: str, marks: list[Mark], unmapped: list[str]) -> None:
        p = int(key.rpartition("/")[2])
        below = cp.sources[key]
        direct = [m for m in marks if m.source is None and m.partition == p
                  and m.offset < below]
        where = wrappers.written(topic, pname, cp)
        if len(where) != len(direct):
            unmapped.append(f"{topic}/{pname}: the bridge wrote {len(where)} messages there, "
                            f"the target has {len(direct)} records of {key} below its position "
                            f"{below}")
            return
        for m, (at, index) in zip(direct, where, strict=True):
            self.marks[(p, m.offset)] = Mark(p, m.offset, (topic, pname), at, index)
        self.later[p] = (topic, pname)

    def mark(self, m: Mark) -> Mark:
        return self.marks.get((m.partition, m.offset), m)


def make_reverse_plan(session: ZkSession, group07: str, bootstrap: str, target_group: str, *,
                      topic_map: Mapping[str, str] | None = None,
                      topics: Iterable[str] | None = None) -> ReversePlan:
    """Compute the rollback (see module docstring); reads ZooKeeper, the target and the 0.7
    brokers, writes nothing."""
    plan = ReversePlan(live_members=live_members_07(session, group07))
    state = target_group_state(bootstrap, target_group)
    if state in _LIVE_STATES:
        plan.target_live = state
    committed = read_group_offsets(session, group07)
    wanted = set(topics) if topics is not None else set(committed)
    if not wanted:
        raise MirrorError(f"0.7 group {group07} has no committed offsets: give --topic")
    wrappers = _Wrappers(session)
    for target, sources in sorted(targets_of(wanted, topic_map or {}).items()):
        n, marks = scan_marks(bootstrap, target)
        at = target_group_offsets(bootstrap, target_group, target, n)
        pending: dict[tuple[str, str], list[tuple[int, int]]] = {}
        consumed: dict[tuple[str, str], list[tuple[int, int]]] = {}
        no_offset: set[int] = set()
        unconsumed_direct = 0
        bridged = _Bridged(session, wrappers, sources, target, marks, plan.unmapped)
        for m in map(bridged.mark, marks):
            if m.source is not None and m.source[0] not in sources:
                continue
            if m.partition not in at:
                no_offset.add(m.partition)
                continue
            if m.source is None:
                later = bridged.later.get(m.partition)
                if later is not None:  # the bridge copies it into 0.7 when it runs again
                    if m.offset < at[m.partition]:
                        bridged.again[later] = bridged.again.get(later, 0) + 1
                elif m.offset >= at[m.partition]:
                    unconsumed_direct += 1
                else:
                    plan.written += 1
                continue
            side = consumed if m.offset < at[m.partition] else pending
            side.setdefault(m.source, []).append((m.at, m.index))
        plan.unmapped += [f"{target}/{p}: target group {target_group} has no committed offset "
                          "there" for p in sorted(no_offset)]
        if unconsumed_direct:
            plan.unmapped.append(
                f"{target}: {unconsumed_direct} records written on target after "
                f"{target_group}'s offsets exist only there; a 0.7 consumer would never get "
                "them (consume them on the target first)")
        for topic in sorted(sources):
            names = set(read_partition_names(session, topic)) | set(committed.get(topic, {}))
            names |= {s[1] for s in (*pending, *consumed) if s[0] == topic}
            for pname in sorted(names):
                row = _row(session, group07, (topic, pname), pending.get((topic, pname), []),
                           consumed.get((topic, pname), []), wrappers, plan.unmapped)
                if row is not None:
                    extra = bridged.again.get((topic, pname), 0)
                    plan.rows.append(replace(row, again=row.again + extra) if extra else row)
    return plan


def _row(session: ZkSession, group07: str, source: tuple[str, str],
         pending: list[tuple[int, int]], consumed: list[tuple[int, int]],
         wrappers: _Wrappers, unmapped: list[str]) -> ReverseRow | None:
    topic, pname = source
    current, version = read_offset_versioned(session, group07, topic, pname)
    floor = current if current is not None else -1  # G07 had everything before it
    pending = [where for where in pending if where[0] >= floor]
    if pending:
        resume = min(pending)[0]
    elif consumed and max(consumed)[0] >= floor:
        last_at, last_index = max(consumed)
        try:
            count, end = wrappers.at(topic, pname, last_at)
        except MirrorError as exc:
            unmapped.append(str(exc))
            return None
        resume = end if last_index + 1 >= count else last_at
    elif current is not None:
        resume = current  # G got nothing of it that G07 had not: G07 continues there
    else:
        return None
    again = sum(1 for where in consumed if where[0] >= resume)
    return ReverseRow(topic, pname, resume, current, version, len(pending), again)


def format_reverse(plan: ReversePlan) -> str:
    return format_columns(
        ("0.7 topic", "partition", "offset", "committed now", "to deliver", "again"),
        [(r.topic, r.partition, str(r.offset), "-" if r.current is None else str(r.current),
          str(r.pending), str(r.again)) for r in plan.rows])


def apply_reverse(session: ZkSession, plan: ReversePlan, group07: str) -> list[str]:
    """Write the plan's offsets for ``group07`` (compare-and-set); returns what was not
    written because another writer moved the offset after the plan was made."""
    failed: list[str] = []
    for row in plan.rows:
        if row.offset == row.current:
            continue
        planned_from = row.current

        def unchanged(stored: int, planned_from: int | None = planned_from) -> bool:
            return stored == planned_from  # rewrite only what the plan was made from

        result = commit_offset_cas(session, group07, row.topic, row.partition, row.offset,
                                   version=row.version, may_rewind=unchanged)
        if not result.written:
            failed.append(f"{row.topic}/{row.partition}: changed to {result.stored} since the "
                          "plan; not written (stop the group and run again)")
    return failed
