"""One round written while the next one is read: a writer thread behind a hand-off of one.

The bridge reads a poll's records and routes them on its loop thread (Python work), then
writes them into 0.7 (ZooKeeper compare-and-sets and confirmed produces: waits on sockets).
`Pipeline` overlaps the two: `submit` hands a prepared round to the writer thread and returns
as soon as the previous hand-off was taken, so at most one round is being written and one
waits.  Rounds are written strictly in order.

Invariants:

* a round's effects (its ``write``) happen after every earlier round's, never concurrently;
* after a round failed -- an error, or `Stopped` -- no later round is written (positions only
  ever move over whole, written rounds): the pipeline is *broken*, `submit` raises `Stopped`,
  and the error went to ``fail``;
* `idle` returns once nothing is queued or being written, so the caller may use what the
  writer uses (a rebalance, a claim, the final commit).
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
                 *, name: str = "mirror-writer") -> None:
        self._write = write
        self._fail = fail
        self._cond = threading.Condition()
        self._next: R | None = None
        self._busy = False
        self._broken = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, round_: R) -> None:
        """Queue ``round_`` behind the one being written (waits while one is queued)."""
        with self._cond:
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
