"""Simulated time: one event queue, one seeded RNG, processes that can be paused or killed.

Everything in a simulation happens inside `Loop.run_until`: an event is a callable scheduled
at a simulated time (seconds, a float).  Events run in time order; ties run in the order they
were scheduled (a global sequence number), so a run depends on nothing but the seed.  There is
no thread, no wall clock and no other source of randomness than `Loop.rng`.

A `Process` stands for one OS process of the simulated world (a group member with its
ZooKeeper client, fetchers and application).  Every event addressed to a process goes
through it:

* a **killed** process (kill -9) drops every event addressed to it, now and later;
* a **paused** process (SIGSTOP, a long GC) keeps the events that fall due while it sleeps
  and runs them, in their original order, when it wakes (`Process.wake`) -- that is what a
  frozen JVM or Python process does with the bytes waiting in its sockets.

Invariant: `Loop.now` never decreases; an event scheduled "in the past" runs at ``now``.

The trace (`Loop.trace`) is off by default (formatting costs more than the simulation);
a failing seed is simply run again with ``trace=True`` -- the run is deterministic, so the
second run is the same run, now with its story printed.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

__all__ = ["Loop", "Process"]


class Process:
    """One simulated OS process: runs, pauses (keeping its events) or dies (dropping them)."""

    __slots__ = ("dead", "deferred", "name", "paused", "woke_at")

    def __init__(self, name: str) -> None:
        self.name = name
        self.dead = False
        self.paused = False
        self.woke_at = 0.0
        self.deferred: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []


class Loop:
    """The event queue and the simulation's only clock and RNG."""

    def __init__(self, seed: int, *, trace: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0.0
        self.tracing = trace
        self.trace: list[str] = []
        self.steps = 0
        self.halted = False
        self._queue: list[tuple[float, int, Process | None, Callable[..., Any],
                                tuple[Any, ...]]] = []
        self._seq = 0

    def at(self, when: float, fn: Callable[..., Any], *args: Any,
           proc: Process | None = None) -> None:
        """Run ``fn(*args)`` at simulated time ``when`` (on ``proc``'s behalf, if given)."""
        self._seq += 1
        heapq.heappush(self._queue, (when if when > self.now else self.now, self._seq, proc,
                                     fn, args))

    def after(self, delay: float, fn: Callable[..., Any], *args: Any,
              proc: Process | None = None) -> None:
        self.at(self.now + delay, fn, *args, proc=proc)

    def log(self, who: str, what: str) -> None:
        """Append one line to the trace (only when tracing; callers may pre-check
        `tracing` to avoid building the message)."""
        if self.tracing:
            self.trace.append(f"{self.now:10.4f} {who:>14} {what}")

    def pause(self, proc: Process) -> None:
        proc.paused = True

    def wake(self, proc: Process) -> None:
        """Resume a paused process: what fell due while it slept runs now, in order."""
        if not proc.paused:
            return
        proc.paused = False
        proc.woke_at = self.now
        deferred, proc.deferred = proc.deferred, []
        for fn, args in deferred:
            self.at(self.now, fn, *args, proc=proc)

    def kill(self, proc: Process) -> None:
        proc.dead = True
        proc.paused = False
        proc.deferred = []

    def halt(self) -> None:
        """Make `run_until` return after the event that is running."""
        self.halted = True

    def run_until(self, end: float) -> None:
        """Run every event due at or before ``end``, or until an event calls `halt`."""
        queue = self._queue
        pop = heapq.heappop
        self.halted = False
        while queue and queue[0][0] <= end and not self.halted:
            when, _, proc, fn, args = pop(queue)
            self.now = when
            if proc is not None:
                if proc.dead:
                    continue
                if proc.paused:
                    proc.deferred.append((fn, args))
                    continue
            self.steps += 1
            fn(*args)
        if not self.halted and end > self.now and end != float("inf"):
            self.now = end

    @property
    def pending(self) -> int:
        return len(self._queue)
