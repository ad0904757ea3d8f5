"""No loops on the 0.7 side: the forward mirror skips what a bridge wrote into 0.7.

With both directions running between the same clusters, a record produced on the modern side
is bridged into 0.7 (`zkconsumer.mirror.bridge`), and the forward mirror reading that 0.7
partition would copy it back.  0.7 messages carry no headers, so the mark is kept beside the
data: every bridge group records, per 0.7 partition, the byte ranges it wrote and the batch it
is writing (`zkconsumer.zk.paths.BridgeCheckpoint`, under
``/zkconsumer/bridge/targets/<topic>/<B-P>/<group>``).  A message whose offset falls in one of
those ranges came from the modern side: the forward mirror acknowledges it (so offsets move)
and does not write it.

Why it is exact: a bridge records its intent (start, size) *before* it produces, so once a
message is fetchable its range is in ZooKeeper.  The guard re-reads a partition's checkpoints
whenever a poll brings offsets past what it verified, *after* that poll -- so every bridged
message it is asked about is covered by what it read.  One ``getChildren`` per topic per poll
says which partitions have bridge checkpoints at all; only those are read further, so a
forward mirror with no bridge running pays one ZooKeeper read per topic per poll.

Ranges are kept per checkpoint up to `zkconsumer.zk.paths.BRIDGE_MAX_RANGES` (merged when
contiguous: one range while the bridge is the only writer; a partition shared with other
producers fragments them, and the oldest are dropped beyond that bound -- documented in
docs/mirror.md).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from zkconsumer.zk.paths import BridgeCheckpoint

__all__ = ["BridgeReader", "LoopGuard", "inside"]

log = logging.getLogger(__name__)


class BridgeReader(Protocol):
    """ZooKeeper reads the guard needs (`zkconsumer.mirror.runner`'s source view)."""

    def bridged_partitions(self, topic: str) -> list[str]: ...
    def bridge_checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]: ...


def inside(ranges: Sequence[tuple[int, int]], offset: int) -> bool:
    """Whether ``offset`` lies in one of the ``[start, end)`` ``ranges``."""
    return any(s <= offset < e for s, e in ranges)


class LoopGuard:
    """Which 0.7 offsets of a partition a bridge wrote (see the module docstring).

    Call `new_poll` once per poll, then `ranges` for each partition run of that poll.
    Used from the mirror loop thread only.
    """

    def __init__(self, reader: BridgeReader) -> None:
        self._reader = reader
        self._verified: dict[tuple[str, str], int] = {}
        self._ranges: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._bridged: dict[str, frozenset[str]] = {}
        self.skipped = 0

    def new_poll(self) -> None:
        """Forget the per-topic answers of the previous poll (they may be stale now)."""
        self._bridged.clear()

    def ranges(self, topic: str, partition: str, last_offset: int) -> list[tuple[int, int]]:
        """The bridge ranges of ``topic``/``partition`` that may hold offsets up to
        ``last_offset`` (the last offset of this poll's run); [] when no bridge writes it."""
        key = (topic, partition)
        if last_offset < self._verified.get(key, -1):
            return self._ranges.get(key, [])
        bridged = self._bridged.get(topic)
        if bridged is None:
            bridged = self._bridged[topic] = frozenset(self._reader.bridged_partitions(topic))
        if partition not in bridged:
            self._ranges.pop(key, None)
            self._verified[key] = last_offset + 1
            return []
        found: list[tuple[int, int]] = []
        for cp in self._reader.bridge_checkpoints(topic, partition):
            found.extend(cp.ranges)
            if cp.intent is not None:
                found.append((cp.intent.start, cp.intent.start + cp.intent.size))
        ranges = sorted(found)
        if ranges and key not in self._ranges:
            log.info("%s/%s: a bridge writes this 0.7 partition; what it wrote is not "
                     "mirrored back", topic, partition)
        self._ranges[key] = ranges
        self._verified[key] = last_offset + 1
        return ranges
