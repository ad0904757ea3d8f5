"""Source positions recorded *in the target*, in the same transaction as the data they cover.

The exactly-once mirror (`zkconsumer.mirror.exactly_once`) writes, at the end of every
transaction, one record per source partition to a checkpoint topic on the target cluster
(``__zkconsumer_mirror_checkpoints`` by default; one partition, ``cleanup.policy=compact``):

* key -- JSON ``[mirror group, source topic, "B-P"]``: compaction keeps the latest per
  source partition;
* value -- JSON ``{"offset": O, "skip": K, "target": T, "positions": {"p": off, ...}}``:
  resume the 0.7 partition at byte offset ``O`` and drop the first ``K`` messages found
  there (a transaction may end inside a compressed 0.7 set, whose messages all share the
  wrapper's offset); ``positions`` are, per partition of target topic ``T``, an offset at or
  below which every later record of this source partition will be written -- where a
  claim-time scan starts (see below).  ``O = -1`` is the claim marker written before the
  first transaction: "resume where the 0.7 group's committed offset says".

Because the checkpoint commits or aborts with its data, a ``read_committed`` reader of the
checkpoint topic sees exactly the source position the target's visible data reached.

Provenance headers on every mirrored record (``zkc.source`` = ``topic/B-P``, ``zkc.offset``,
``zkc.index`` = position inside the 0.7 wrapper, 0 for a plain message) let `scan_beyond`
find records of a source partition past its checkpoint.  On a broker that filters aborted
transactions for ``read_committed`` readers (Apache Kafka) it finds nothing.  On one that does
not (tansu 0.6: its fetch answers carry no aborted-transaction list, so aborted records stay
visible) it finds the aborted-but-visible records of the last transaction, and the mirror
does not write them a second time: the target then holds each message once *as readers see
it*.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.reader import iter_records

__all__ = ["CHECKPOINT_TOPIC", "HEADER_INDEX", "HEADER_OFFSET", "HEADER_SOURCE", "Checkpoint",
           "checkpoint_key", "read_checkpoints", "scan_beyond"]

CHECKPOINT_TOPIC = "__zkconsumer_mirror_checkpoints"
HEADER_SOURCE = "zkc.source"
HEADER_OFFSET = "zkc.offset"
HEADER_INDEX = "zkc.index"


def checkpoint_key(group: str, topic: str, partition: str) -> bytes:
    return json.dumps([group, topic, partition], separators=(",", ":")).encode()


@dataclass(frozen=True)
class Checkpoint:
    """Where a source partition resumes, and where a scan of the target starts."""

    offset: int
    skip: int = 0
    target: str = ""
    positions: Mapping[int, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps({"offset": self.offset, "skip": self.skip, "target": self.target,
                           "positions": {str(p): o for p, o in self.positions.items()}},
                          separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint:
        try:
            raw = json.loads(data)
            return cls(int(raw["offset"]), int(raw.get("skip", 0)), str(raw.get("target", "")),
                       {int(p): int(o) for p, o in (raw.get("positions") or {}).items()})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise MirrorError(f"unreadable mirror checkpoint {data[:200]!r}: {exc}") from exc


def read_checkpoints(bootstrap: str, topic: str, keys: Iterable[bytes], *,
                     timeout: float = 60.0) -> dict[bytes, Checkpoint]:
    """The latest committed checkpoint of each of ``keys`` (read_committed, to the end).

    To the high watermark as of the call (`iter_records`), waiting for every transaction open
    below it.  Every lane's transactions write into this one partition, so another lane's
    open transaction holds the last stable offset below checkpoints committed after it; a read that stopped there would hand a claim an older
    checkpoint -- or none -- and the claim would write again what was mirrored since
    (duplicates; seen under load with ``kill -9``).  The claimed partitions' own previous
    owners were fenced before this read, so their transactions are over."""
    wanted = set(keys)
    out: dict[bytes, Checkpoint] = {}
    for record in iter_records(bootstrap, topic, {0: 0}, timeout=timeout, high_watermark=True):
        if record.key in wanted:
            out[record.key] = Checkpoint.decode(record.value)  # later records win
    return out


def scan_beyond(bootstrap: str, topic: str, positions: Mapping[int, int], source: bytes,
                resume: tuple[int, int], *, timeout: float = 60.0) -> set[tuple[int, int]]:
    """``(0.7 offset, index)`` of every record of ``source`` (``topic/B-P``) at or past
    ``resume`` that a read_committed reader of ``topic`` sees from ``positions`` on."""
    found: set[tuple[int, int]] = set()
    # settled: to the end as a read_committed watermark query answers it (the LSO); records
    # behind another writer's open transaction are not waited for here -- on shared target
    # partitions that writer may be one of this process's own lanes (see iter_records)
    for record in iter_records(bootstrap, topic, positions, timeout=timeout, settled=True):
        if record.header(HEADER_SOURCE) != source:
            continue
        raw_offset, raw_index = record.header(HEADER_OFFSET), record.header(HEADER_INDEX)
        if raw_offset is None:
            continue
        where = (int(raw_offset), int(raw_index or b"0"))
        if where >= resume:
            found.add(where)
    return found
