"""In-order acknowledgement tracking: the rule that makes the mirror lose nothing.

Every message sent to the target is `add`-ed here, in source order, under its source partition
key ``(topic, "B-P")``.  The target client completes or fails each one later, from its own I/O
thread and in any order.  `drain_acked` then yields, per partition, the **last message of the
longest fully acknowledged prefix** -- the only message whose offset may be acknowledged to the
0.7 group and committed to ZooKeeper.  A message acknowledged out of order (a later batch
finishing first) waits until everything before it in that partition is acknowledged too.

An entry may stand for several messages (its ``weight``: the at-least-once mirror tracks one
entry per partition run of a poll, a few hundred messages, not one per message); the window
and the drained counts are in messages.  The window is bounded (``max_in_flight`` tracked
messages, acknowledged-but-undrained ones included): `room` / `wait_for_room` let the pipeline stop polling the source when the target
is slow -- backpressure instead of unbounded memory.

A failed delivery is never skipped: the entry stays in its partition as FAILED, which blocks
that partition's committable prefix.  Once nothing is PENDING (`wait_settled`), `take_retry`
hands back, per partition, every entry from the first failure on, in order, re-armed as
PENDING with a new attempt number; the caller resends them.  Entries after the failure that
had already succeeded are resent too, so the target sees the partition's order again from the
failure point on (duplicates are bounded by the window; order is never inverted for good).

Completions carry the attempt they belong to, so a late callback from a superseded attempt or
from a partition `forget`-ten on revocation changes nothing.  All methods are thread-safe.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

__all__ = ["AckTracker", "Drained", "Entry", "EntryState"]

M = TypeVar("M")
R = TypeVar("R")


@dataclass(frozen=True)
class Drained(Generic[M]):
    """A partition's newly committable prefix: its last message, count and payload bytes."""

    message: M
    count: int
    size: int


class EntryState(Enum):
    PENDING = "pending"
    DONE = "done"
    FAILED = "failed"


class Entry(Generic[M, R]):
    """One message in flight: the source message, where it goes, and its delivery state."""

    __slots__ = ("attempt", "dropped", "error", "key", "message", "route", "size", "state",
                 "weight")

    def __init__(self, key: Hashable, message: M, route: R, size: int, weight: int = 1) -> None:
        self.key = key
        self.message = message
        self.route = route
        self.size = size
        self.weight = weight
        self.state = EntryState.PENDING
        self.error: BaseException | None = None
        self.attempt = 0
        self.dropped = False

    def __repr__(self) -> str:
        return f"Entry({self.key!r}, {self.state.value}, attempt={self.attempt})"


class AckTracker(Generic[M, R]):
    """Per-partition in-order ack tracking over a bounded window (see module docstring)."""

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight <= 0:
            raise ValueError("max_in_flight must be positive")
        self.max_in_flight = max_in_flight
        self._cond = threading.Condition(threading.Lock())
        self._parts: dict[Hashable, deque[Entry[M, R]]] = {}
        self._tracked = 0
        self._pending = 0
        self._failed = 0
        self._drainable = False  # some partition's oldest entry is DONE (wait_for_room)
        self._last_error: BaseException | None = None

    # -- producer side (the mirror loop) ------------------------------------------------------

    def add(self, key: Hashable, message: M, route: R, size: int = 0,
            weight: int = 1) -> Entry[M, R]:
        """Track ``weight`` messages about to be sent as one entry (completed or failed as
        one); returns the entry whose attempt the callbacks name.

        Never blocks: the caller checks `room` first (a rebalance may legitimately overshoot
        the window by one poll batch).
        """
        entry: Entry[M, R] = Entry(key, message, route, size, weight)
        with self._cond:
            q = self._parts.get(key)
            if q is None:
                q = self._parts[key] = deque()
            q.append(entry)
            self._tracked += weight
            self._pending += 1
        return entry

    def room(self) -> int:
        with self._cond:
            return max(0, self.max_in_flight - self._tracked)

    def wait_for_room(self, timeout: float) -> bool:
        """Block until the window has room, a failure needs handling, a partition's oldest
        entry was acknowledged (`drain_acked` then makes room), or ``timeout`` passes."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._tracked < self.max_in_flight or self._failed > 0
                or self._drainable, timeout)

    # -- target side (callbacks, any thread) --------------------------------------------------

    def complete(self, entry: Entry[M, R], attempt: int) -> None:
        with self._cond:
            if entry.dropped or entry.attempt != attempt or entry.state is not EntryState.PENDING:
                return
            entry.state = EntryState.DONE
            self._pending -= 1
            q = self._parts.get(entry.key)
            if q and q[0] is entry:  # a prefix became drainable
                self._drainable = True
            self._cond.notify_all()

    def fail(self, entry: Entry[M, R], attempt: int, error: BaseException) -> None:
        with self._cond:
            if entry.dropped or entry.attempt != attempt or entry.state is not EntryState.PENDING:
                return
            entry.state = EntryState.FAILED
            entry.error = error
            self._last_error = error
            self._pending -= 1
            self._failed += 1
            self._cond.notify_all()

    # -- commit side --------------------------------------------------------------------------

    def drain_acked(self, keys: Iterable[Hashable] | None = None) -> dict[Hashable, Drained[M]]:
        """Pop each partition's acknowledged prefix; per partition return its last message
        (the only one that may be acknowledged to the 0.7 consumer, and so committed) with
        how many messages and payload bytes the prefix held."""
        out: dict[Hashable, Drained[M]] = {}
        with self._cond:
            selected = list(self._parts) if keys is None else [k for k in keys
                                                                if k in self._parts]
            popped = 0
            if keys is None:
                self._drainable = False
            for key in selected:
                q = self._parts[key]
                last = None
                count = size = 0
                while q and q[0].state is EntryState.DONE:
                    last = q.popleft()
                    count += last.weight
                    size += last.size
                if last is not None:
                    out[key] = Drained(last.message, count, size)
                    popped += count
                if not q:
                    del self._parts[key]
            if popped:
                self._tracked -= popped
                self._cond.notify_all()
        return out

    # -- failure handling ---------------------------------------------------------------------

    @property
    def has_failures(self) -> bool:
        with self._cond:
            return self._failed > 0

    @property
    def last_error(self) -> BaseException | None:
        with self._cond:
            return self._last_error

    def wait_settled(self, timeout: float, keys: Iterable[Hashable] | None = None) -> bool:
        """Wait until nothing (of ``keys``' partitions) is PENDING; False on timeout."""
        wanted = None if keys is None else set(keys)

        def settled() -> bool:
            if wanted is None:
                return self._pending == 0
            return not any(e.state is EntryState.PENDING
                           for k in wanted for e in self._parts.get(k, ()))

        with self._cond:
            return self._cond.wait_for(settled, timeout)

    def take_retry(self) -> list[Entry[M, R]]:
        """Re-arm every entry from each partition's first failure on; return them in order.

        Call only when settled (see module docstring): a still-PENDING entry after a failure
        would otherwise be written twice concurrently, possibly out of order.
        """
        out: list[Entry[M, R]] = []
        with self._cond:
            for q in self._parts.values():
                first = next((i for i, e in enumerate(q) if e.state is EntryState.FAILED), None)
                if first is None:
                    continue
                for i in range(first, len(q)):
                    e = q[i]
                    if e.state is EntryState.PENDING:
                        continue  # caller broke the contract; leave the live attempt alone
                    e.state = EntryState.PENDING
                    e.error = None
                    e.attempt += 1
                    self._pending += 1
                    out.append(e)
            self._failed = 0
        return out

    # -- rebalance ----------------------------------------------------------------------------

    def forget(self, keys: Iterable[Hashable]) -> int:
        """Drop partitions (revoked): their unacknowledged entries will be replayed by the next
        owner from the committed offset.  Returns how many entries were dropped."""
        dropped = 0
        with self._cond:
            for key in list(keys):
                q = self._parts.pop(key, None)
                if not q:
                    continue
                for e in q:
                    e.dropped = True
                    if e.state is EntryState.PENDING:
                        self._pending -= 1
                    elif e.state is EntryState.FAILED:
                        self._failed -= 1
                    dropped += e.weight
            self._tracked -= dropped
            self._cond.notify_all()
        return dropped

    # -- introspection ------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Tracked messages (sent and not yet drained), the window's fill level."""
        with self._cond:
            return self._tracked

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def keys(self) -> list[Hashable]:
        with self._cond:
            return list(self._parts)
