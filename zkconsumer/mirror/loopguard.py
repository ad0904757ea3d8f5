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

**The batch in flight.**  An intent says where the bridge *meant* its batch to land; where
another producer also writes the partition, the batch can land further on (the bridge reads
it back and records where it did land, `zkconsumer.mirror.bridge_target`).  Trusting the
intent's range would skip the other producer's messages inside it (lost on the modern side)
and copy the bridged ones outside it back.  So when a poll reaches an intent's start, the
guard re-reads the checkpoints until that intent is resolved -- a 0.7 consumer sees a batch
only once the broker flushed it, and the bridge resolves right after its read-back of the
flushed batch, so the wait is a few milliseconds.  An intent still unresolved after
``wait_limit`` (its bridge died before resolving, or is stuck) is used as it stands, with a
WARNING, and not waited for again: exact for a bridge that is its partition's only writer.

Ranges are kept per checkpoint up to `zkconsumer.zk.paths.BRIDGE_MAX_RANGES` (merged when
contiguous: one range while the bridge is the only writer; a partition shared with other
producers fragments them, and the oldest are dropped beyond that bound -- documented in
docs/mirror.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from zkconsumer.mirror.runtime import Stopped
from zkconsumer.zk.paths import BridgeCheckpoint, BridgeIntent

__all__ = ["BridgeReader", "LoopGuard", "inside"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class BridgeReader(Protocol):
    """ZooKeeper reads the guard needs (`zkconsumer.mirror.runner`'s source view)."""

    def bridged_partitions(self, topic: str) -> list[str]: ...
    def bridge_checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]: ...


class Reading(Protocol):
    """How the guard makes a read: ``read(what, fn)`` returns ``fn()``, retried as the
    caller sees fit (the engines pass `zkconsumer.mirror.runtime.Runtime.zookeeper_read`)."""

    def __call__(self, what: str, fn: Callable[[], T]) -> T: ...


def _once(what: str, fn: Callable[[], T]) -> T:
    return fn()


def inside(ranges: Sequence[tuple[int, int]], offset: int) -> bool:
    """Whether ``offset`` lies in one of the ``[start, end)`` ``ranges``."""
    return any(s <= offset < e for s, e in ranges)


class LoopGuard:
    """Which 0.7 offsets of a partition a bridge wrote (see the module docstring).

    Call `new_poll` once per poll, then `ranges` for each partition run of that poll.
    Used from the mirror loop thread only.  ``wait(seconds)`` sleeps between re-reads of a
    batch in flight and returns True when the mirror is stopping (the engine's
    `zkconsumer.mirror.runtime.Runtime.wait`; `ranges` then raises `Stopped`, and the rest of
    the poll is not sent); ``clock`` measures ``wait_limit``.  ``marked``: the mirror writes
    provenance headers, which is how a bridge reading its target skips its records -- an
    at-least-once ``kafka://`` mirror writes none, and is warned when a bridge shows up.
    ``read`` makes each ZooKeeper read (`Reading`: the engines wait out a lost session).
    """

    def __init__(self, reader: BridgeReader, *, wait_limit: float = 10.0,
                 wait: Callable[[float], object] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, marked: bool = True,
                 read: Reading = _once) -> None:
        self._reader = reader
        self._read = read
        self._marked = marked
        self._verified: dict[tuple[str, str], int] = {}
        self._ranges: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self._bridged: dict[str, frozenset[str]] = {}
        self._waited_out: set[tuple[str, str, str, int]] = set()
        self._wait_limit = wait_limit
        self._wait = wait
        self._clock = clock
        self.skipped = 0
        self.waits = 0  # re-reads for a batch in flight (for tests and debugging)

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
            bridged = self._bridged[topic] = frozenset(self._read(
                f"reading which partitions of {topic} bridges write",
                lambda: self._reader.bridged_partitions(topic)))
        if partition not in bridged:
            self._ranges.pop(key, None)
            self._verified[key] = last_offset + 1
            return []
        cps = self._settled(topic, partition, last_offset)
        found: list[tuple[int, int]] = []
        for cp in cps:
            found.extend(cp.ranges)
            if cp.intent is not None:
                found.append((cp.intent.start, cp.intent.start + cp.intent.size))
        ranges = sorted(found)
        if ranges and key not in self._ranges:
            log.info("%s/%s: a bridge writes this 0.7 partition; what it wrote is not "
                     "mirrored back", topic, partition)
            if not self._marked:
                log.warning("%s/%s: a bridge writes this 0.7 partition and this at-least-once "
                            "mirror writes no provenance headers: a bridge reading its target "
                            "topic copies each record mirrored from here back into 0.7 once "
                            "(run the mirror exactly-once, the default)", topic, partition)
        self._ranges[key] = ranges
        self._verified[key] = last_offset + 1
        return ranges

    def _checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]:
        return self._read(f"reading the bridge checkpoints of {topic}/{partition}",
                          lambda: self._reader.bridge_checkpoints(topic, partition))

    def _settled(self, topic: str, partition: str, last_offset: int) -> list[BridgeCheckpoint]:
        """The partition's checkpoints once no intent this poll reaches is in flight (see
        the module docstring), or as they stand after ``wait_limit``."""
        cps = self._checkpoints(topic, partition)
        deadline: float | None = None
        pause = 0.002
        while True:
            pending = [i for i in _intents(cps) if i.start <= last_offset
                       and (topic, partition, i.owner, i.start) not in self._waited_out]
            if not pending:
                return cps
            now = self._clock()
            if deadline is None:
                deadline = now + self._wait_limit
            elif now >= deadline:
                for i in pending:
                    self._waited_out.add((topic, partition, i.owner, i.start))
                    log.warning("%s/%s: the bridge batch in flight at %d (%d bytes, member %s) "
                                "was not resolved within %.1fs; its intended range is skipped "
                                "as it stands (exact if that bridge is the partition's only "
                                "writer)", topic, partition, i.start, i.size, i.owner,
                                self._wait_limit)
                return cps
            if self._wait(pause):  # stopping: the rest of this poll is not sent (it is
                raise Stopped("stopped while waiting for a bridge batch in flight")  # replayed)
            pause = min(pause * 2, 0.05)
            self.waits += 1
            cps = self._checkpoints(topic, partition)


def _intents(cps: Sequence[BridgeCheckpoint]) -> list[BridgeIntent]:
    return [cp.intent for cp in cps if cp.intent is not None]
