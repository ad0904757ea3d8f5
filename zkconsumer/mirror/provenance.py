"""What the target holds, record by record, in 0.7 terms: the one mapping both directions of
``mirror translate`` use.

The exactly-once mirror stamps every record it writes with provenance headers (see
`zkconsumer.mirror.checkpoints`): ``zkc.source`` = ``topic/B-P``, ``zkc.offset`` = the 0.7
byte offset of the message -- for a message inside a compressed 0.7 set, the offset of the
*wrapper* (all messages of a set share it) -- and ``zkc.index`` = its position inside the
wrapper.  `scan_marks` reads a target topic once and returns one `Mark` per record; a record
without headers was written on the target directly (by a producer that moved, not by the
mirror) and has ``source None``.

* forward (`zkconsumer.mirror.translate`): a 0.7 group's committed byte offsets pick, per
  target partition, the first record the group had not consumed;
* reverse (`zkconsumer.mirror.translate_reverse`): a target group's committed offsets pick,
  per 0.7 partition, the first message the group had not consumed -- rounded down to its
  wrapper's start, because a 0.7 consumer can only resume at a message-set boundary.

Invariants: read-only; the target is read with ``read_committed`` from the beginning to the
end visible at the call; marks keep log order per target partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from zkconsumer.mirror.checkpoints import HEADER_INDEX, HEADER_OFFSET, HEADER_SOURCE
from zkconsumer.zk.paths import consumer_ids_path
from zkconsumer.zk.session import ZkSession

__all__ = ["Mark", "format_columns", "live_members_07", "scan_marks", "targets_of"]


@dataclass(frozen=True, slots=True)
class Mark:
    """One target record: where it is (``partition``, ``offset``) and where it came from
    (``source`` = ``(0.7 topic, "B-P")``, ``at`` = wrapper byte offset, ``index`` in it);
    ``source`` is None for a record written on the target directly."""

    partition: int
    offset: int
    source: tuple[str, str] | None
    at: int = -1
    index: int = 0


def scan_marks(bootstrap: str, topic: str) -> tuple[int, list[Mark]]:
    """``(partition count, marks of every record)`` of target ``topic``."""
    from zkconsumer.mirror.reader import iter_records
    from zkconsumer.mirror.targets import KafkaAdmin

    n = KafkaAdmin([bootstrap], client_id="zkconsumer-mirror-translate").partition_count(topic)
    marks: list[Mark] = []
    for record in iter_records(bootstrap, topic, dict.fromkeys(range(n), 0)):
        source, raw_offset = record.header(HEADER_SOURCE), record.header(HEADER_OFFSET)
        if source is None or raw_offset is None:
            marks.append(Mark(record.partition, record.offset, None))
            continue
        name, _, partition = source.decode("utf-8", "replace").rpartition("/")
        marks.append(Mark(record.partition, record.offset, (name, partition), int(raw_offset),
                          int(record.header(HEADER_INDEX) or b"0")))
    return n, marks


def targets_of(topics: Iterable[str], topic_map: Mapping[str, str]) -> dict[str, set[str]]:
    """``{target topic: {0.7 topics mirrored into it}}`` (a ``--topic-map`` may merge)."""
    out: dict[str, set[str]] = {}
    for topic in topics:
        out.setdefault(topic_map.get(topic, topic), set()).add(topic)
    return out


def live_members_07(session: ZkSession, group: str) -> list[str]:
    """Registered members (``/consumers/<group>/ids``) of a 0.7 group."""
    path = consumer_ids_path(group)
    return sorted(session.get_children(path)) if session.exists(path) else []


def format_columns(header: Sequence[str], body: Iterable[Sequence[str]]) -> str:
    """A plain left-aligned table (the plans and ``verify`` print these)."""
    rows = [tuple(header), *(tuple(b) for b in body)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
