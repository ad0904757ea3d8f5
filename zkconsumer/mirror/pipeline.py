"""One round written while the next one is read: a writer thread behind a hand-off of one.

The bridge reads a poll's records and routes them on its loop thread (Python work), then
writes them into 0.7 (ZooKeeper compare-and-sets and confirmed produces: waits on sockets).
`Pipeline` overlaps the two: `submit` hands a prepared round to the writer thread and returns
as soon as the previous hand-off was taken, so at most one round is being written and one
waits.  Rounds are written strictly in order.

**Rounds grow while the writer is busy.**  With a ``merge`` function, a round submitted while
another one still waits is merged into it (if ``merge`` accepts: its own size bound) instead
of waiting.  A round's cost in the writer is mostly fixed -- two ZooKeeper compare-and-sets
per partition and, for the bridge, a wait for the 0.7 broker's flush (up to
``log.default.flush.interval.ms``) -- so a writer that is slower than the reader gets
bigger rounds and the same fixed cost is spread over more messages: the rate settles near the
slower side's own rate instead of ``poll size / round latency``.

Invariants:

* a round's effects (its ``write``) happen after every earlier round's, never concurrently;
* after a round failed -- an error, or `Stopped` -- no later round is written (positions only
  ever move over whole, written rounds): the pipeline is *broken*, `submit` raises `Stopped`,
  and the error went to ``fail``;
* `idle` returns once nothing is queued or being written, so the caller may use what the
  writer uses (a rebalance, a claim, the final commit);
* a merged round is written as one: ``merge(queued, later)`` must give a round whose write
  has the effects of writing ``queued`` and then ``later``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from zkconsumer.mirror.runtime import Stopped

__all__ = ["Pipeline"]

R = TypeVar("R")


class Pipeline(Generic[R]):
    """A writer thread taking rounds one at a time (see the module docstring)."""

    def __init__(self, write: Callable[[R], None], fail: Callable[[BaseException], object],
                 *, name: str = "mirror-writer",
                 merge: Callable[[R, R], R | None] | None = None) -> None:
        self._write = write
        self._merge = merge
        self._fail = fail
        self._cond = threading.Condition()
        self._next: R | None = None
        self._busy = False
        self._broken = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, round_: R) -> None:
        """Queue ``round_`` behind the one being written: merged into the one waiting if
        ``merge`` takes it, else once the waiting one was taken."""
        with self._cond:
            if self._next is not None and self._merge is not None and not (
                    self._broken or self._closed):
                merged = self._merge(self._next, round_)
                if merged is not None:
                    self._next = merged
                    return
            self._cond.wait_for(lambda: self._next is None or self._broken or self._closed)
            if self._broken or self._closed:
                raise Stopped("the writer stopped; no later round is written")
            self._next = round_
            self._cond.notify_all()

    def idle(self) -> None:
        """Wait until nothing is queued or being written."""
        with self._cond:
            self._cond.wait_for(lambda: self._next is None and not self._busy)

    @property
    def broken(self) -> bool:
        return self._broken

    def close(self, timeout: float = 30.0) -> None:
        """Finish what was handed over (unless broken), then end the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._next is not None or self._closed)
                if self._next is None:
                    return  # closed and drained
                round_, self._next = self._next, None
                self._busy = True
                self._cond.notify_all()
            try:
                if not self._broken:
                    self._write(round_)
            except BaseException as exc:  # handed to the engine (fail), never lost
                self._broken = True
                if not isinstance(exc, Stopped):
                    self._fail(exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
