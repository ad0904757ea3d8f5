"""The soak's judge: group state from ZooKeeper and the brokers, and the final count.

Two questions, answered from the outside only (never from a member's own word):

* `Observer.group_problems` -- is every group whole?  Every partition of its topic has an
  owner that is a live thread **and** the owner the 0.7 assignment of the live threads names
  (a member that stopped seeing rebalances keeps stale owners: that is a problem, even though
  each owner is alive), and, given ``ends``, every committed offset reached the log end
  measured then (consumption caught up past the fault).  With ``lag0`` every committed
  offset equals the current log end.
* `count` -- what was lost and what was duplicated.  The ground truth is the **log**: every
  partition is read back from offset 0.  A log entry is (partition, offset, id); compressed
  messages share their wrapper's offset, so the id is part of the key.  A record consumed
  twice repeats its triple (a consumer replay: counted as a duplicate); the same id at two
  log positions is a producer retry (counted apart, in ``log_duplicates``).  A replay re-reads
  a run of consecutive entries from a commit point: ``longest_replay`` is the longest such
  run, which one fault must explain on its own.  Lost = a log
  entry that no member wrote although the group's committed offset is past it ("committed
  past, never written"); an unwritten entry at or after the committed offset is *pending*
  (the group never got there: a stuck group, reported as such, never as a loss).  Gaps are
  reported per partition as offset and id ranges.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.consumer.assignment import assign
from zkconsumer.consumer.groupinfo import describe_group
from zkconsumer.zk.offsets import read_topic_offsets
from zkconsumer.zk.paths import consumer_ids_path, parse_partition_name
from zkconsumer.zk.registry import read_brokers, read_topic_partitions
from zkconsumer.zk.session import ZkSession

__all__ = ["PREFIX", "Ends", "Entry", "Gap", "Observer", "Tally", "count", "parse_id", "read_log",
           "read_records"]

#: Every soak payload is ``soak-<id>``; anything else in a topic (seed messages) is ignored.
PREFIX = "soak-"

Entry = tuple[str, int, int]  # (partition "B-P", offset, id)
Ends = dict[tuple[str, str, str], int | None]  # (group, topic, "B-P") -> log end


def parse_id(value: str) -> int | None:
    return int(value[len(PREFIX):]) if value.startswith(PREFIX) else None


class Observer:
    """Reads groups through its own direct ZooKeeper session (survives proxy faults)."""

    def __init__(self, zk_connect: str, session_timeout_ms: int = 10000) -> None:
        self.session = ZkSession(zk_connect, session_timeout_ms=session_timeout_ms,
                                 connection_timeout_ms=30000).start()

    def close(self) -> None:
        self.session.close()

    def member_ids(self, group: str) -> set[str]:
        return set(self.session.get_children(consumer_ids_path(group)))

    def committed(self, group: str, topic: str) -> dict[str, int]:
        return read_topic_offsets(self.session, group, topic, strict=False)

    def log_ends(self, groups: Sequence[str]) -> Ends:
        return {(g, p.topic, p.partition): p.log_end
                for g in groups for p in describe_group(self.session, g).partitions}

    def group_problems(self, groups: Sequence[str],
                       ends: Ends | None = None, *,
                       lag0: bool = False, members: dict[str, int] | None = None) -> list[str]:
        """[] when every group is whole (see module docstring) and has ``members[group]``
        registered members; else what is wrong."""
        problems: list[str] = []
        for group in groups:
            report = describe_group(self.session, group, socket_timeout=2.0)
            problems += [f"{group}: {p}" for p in report.problems]
            want = (members or {}).get(group)
            if want is not None and len(report.members) != want:
                problems.append(f"{group}: {len(report.members)} registered member(s), "
                                f"{want} running")
            threads = sorted({t for m in report.members for ids in m.threads.values()
                              for t in ids})
            names = [p.partition for p in report.partitions]
            expected = assign(names, threads, threads) if threads else {}
            for p in report.partitions:
                where = f"{group} {p.topic}/{p.partition}"
                if p.owner != expected.get(p.partition):
                    problems.append(f"{where}: owner {p.owner} but the assignment of the live "
                                    f"threads names {expected.get(p.partition)}")
                want = p.log_end if lag0 else (ends or {}).get((group, p.topic, p.partition))
                if (lag0 or ends is not None) and (want is None or p.offset is None
                                                   or p.offset < want):
                    problems.append(f"{where}: committed {p.offset}, log end "
                                    f"{p.log_end}, waiting for {want}")
        return problems


def read_log(zk_connect: str, topic: str) -> list[Entry]:
    """Every soak message of ``topic``, read back from each partition's first byte."""
    entries: list[Entry] = []
    with ZkSession(zk_connect) as session:
        brokers = read_brokers(session)
        counts = read_topic_partitions(session, topic)
    for broker_id, n in sorted(counts.items()):
        info = brokers[broker_id]
        with SimpleConsumer(info.host, info.port, socket_timeout=10.0) as client:
            for part in range(n):
                for m in client.iter_messages(topic, part, 0):
                    ident = parse_id(m.value.decode("utf-8", "replace"))
                    if ident is not None:
                        entries.append((f"{broker_id}-{part}", m.offset, ident))
    return entries


def read_records(paths: Iterable[Path], topic: str) -> tuple[list[Entry], int]:
    """(entries written by members, torn/unreadable lines) from jsonl outputs."""
    out: list[Entry] = []
    bad = 0
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_bytes().splitlines():
            try:
                rec = json.loads(line)
                ident = parse_id(rec["value"])
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            if ident is not None and rec["topic"] == topic:
                out.append((rec["partition"], int(rec["offset"]), ident))
    return out, bad


@dataclass
class Gap:
    """A run of consecutive log entries of one partition that nobody consumed."""

    partition: str
    first_offset: int
    last_offset: int
    ids: list[int]

    def describe(self) -> str:
        return (f"partition {self.partition}: {len(self.ids)} lost at offsets "
                f"{self.first_offset}..{self.last_offset}, ids {min(self.ids)}..{max(self.ids)}")


@dataclass
class Tally:
    produced: int = 0          # ids the producer saw confirmed
    in_log: int = 0            # distinct ids in the log
    log_duplicates: int = 0    # extra log entries of an id (producer retries)
    not_in_log: list[int] = field(default_factory=list)  # confirmed, yet absent: producer loss
    consumed: int = 0          # records the members wrote
    distinct: int = 0          # distinct log entries written
    duplicates: int = 0        # records written more than once (replays)
    longest_replay: int = 0    # most consecutive entries of a partition written again
    unknown: int = 0           # records whose entry is not in the log (must stay 0)
    torn: int = 0              # unreadable output lines (a torn last line after kill -9)
    gaps: list[Gap] = field(default_factory=list)      # lost: committed past, never written
    pending: list[Gap] = field(default_factory=list)   # not written, not committed either

    @property
    def lost(self) -> int:
        return sum(len(g.ids) for g in self.gaps)


def _longest_run(log: list[Entry], marked: set[Entry]) -> int:
    """Most consecutive log entries of one partition that are all in ``marked``."""
    longest = 0
    run: dict[str, int] = {}
    for e in log:  # log order, partitions interleaved
        run[e[0]] = run.get(e[0], 0) + 1 if e in marked else 0
        longest = max(longest, run[e[0]])
    return longest


def _gaps(log: list[Entry], seen: set[Entry]) -> list[Gap]:
    gaps: list[Gap] = []
    by_part: dict[str, list[Entry]] = {}
    for e in log:
        by_part.setdefault(e[0], []).append(e)
    for part, entries in sorted(by_part.items(), key=lambda kv: parse_partition_name(kv[0])):
        current: Gap | None = None
        for e in entries:  # log order
            if e in seen:
                current = None
                continue
            if current is None:
                current = Gap(part, e[1], e[1], [])
                gaps.append(current)
            current.last_offset = e[1]
            current.ids.append(e[2])
    return gaps


def count(produced: Iterable[int], log: list[Entry], records: list[Entry], *,
          committed: dict[str, int] | None = None, by_id: bool = False) -> Tally:
    """Compare what the log holds with what was written.  ``committed`` ("B-P" -> the
    group's final offset; None = everything counts as committed) splits unwritten entries
    into lost and pending.  ``by_id`` (mirrors): records are entries of *another* log, so
    match on ids only and count duplicates per id."""
    produced_ids = set(produced)
    log_ids = Counter(e[2] for e in log)
    t = Tally(produced=len(produced_ids), in_log=len(log_ids),
              log_duplicates=sum(n - 1 for n in log_ids.values()),
              not_in_log=sorted(produced_ids - set(log_ids)), consumed=len(records))
    if by_id:
        written = Counter(e[2] for e in records)
        t.distinct = len(written)
        t.duplicates = max(0, sum(n - 1 for n in written.values()) - t.log_duplicates)
        t.unknown = sum(1 for i in written if i not in log_ids)
        seen = {e for e in log if e[2] in written}
        extra = {e for e in log if written.get(e[2], 0) > log_ids[e[2]]}
    else:
        counted = Counter(records)
        t.distinct = len(counted)
        t.duplicates = sum(n - 1 for n in counted.values())
        log_set = set(log)
        t.unknown = sum(1 for e in counted if e not in log_set)
        seen = set(counted)
        extra = {e for e, n in counted.items() if n > 1}
    t.longest_replay = _longest_run(log, extra)
    if committed is None:
        t.gaps = _gaps(log, seen)
    else:
        done = [e for e in log if e[1] < committed.get(e[0], 0)]
        t.gaps = _gaps(done, seen)
        t.pending = _gaps([e for e in log if e[1] >= committed.get(e[0], 0)], seen)
    return t
