"""``--handler module:function``: call a Python function with batches, in a worker thread.

The handler API (also in docs/operations.md): ``function(messages: list[Message]) -> None``.
Each call gets up to ``--batch-size`` messages of **one partition**, in offset order.  When it
returns, the batch is acknowledged (committed at the next commit).  When it raises, that
partition stops: the *same* batch is retried after a backoff (``--retry-backoff`` doubling up
to ``--retry-backoff-max``) while other partitions go on.  When the last of ``--max-retries``
retries fails (1 + N calls in all) the batch is written to the dead letter (``--dead-letter
FILE`` / ``--dead-letter-topic T``) at once -- no backoff: nothing is retried any more -- and
acknowledged; with no dead letter configured it is retried forever -- a failing partition is
never skipped silently.  The log numbers every call ``attempt K/1+N``.

Why a worker thread: the main loop must keep committing, answering signals and rebalances
while user code runs; the handler runs one call at a time, so it needs no locking of its own.

Invariants: a partition has at most one batch in the handler at a time and its batches are
acknowledged in order; partitions take turns (round-robin) so one busy partition does not
starve the others; `abandon` (rebalance) drops a revoked partition's queue and its retry state,
and the result of a call that was running for it is discarded.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from zkconsumer.backoff import Backoff
from zkconsumer.daemon.formats import MessageLike
from zkconsumer.daemon.sinks.base import Sink
from zkconsumer.daemon.sinks.deadletter import DeadLetter
from zkconsumer.daemon.tracker import AckTracker, Key
from zkconsumer.errors import ConfigurationError, SinkError

__all__ = ["Handler", "HandlerSink", "load_handler"]

log = logging.getLogger(__name__)

Handler = Callable[[list[Any]], object]


def load_handler(spec: str) -> Handler:
    """Import ``module:function`` (``function`` may be dotted, e.g. ``mod:obj.method``).

    The current directory is put on ``sys.path`` first, as ``python -m`` would, so a handler
    file next to where the daemon is started is found.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"--handler {spec!r}: expected module:function")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or the module itself failing at import
        raise ConfigurationError(f"--handler {spec!r}: cannot import {module_name!r}: "
                                 f"{exc!r}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ConfigurationError(f"--handler {spec!r}: {module_name!r} has no "
                                     f"attribute {attr!r}") from exc
    if not callable(obj):
        raise ConfigurationError(f"--handler {spec!r} is not callable")
    handler: Handler = obj
    return handler


class _Partition:
    __slots__ = ("attempts", "batch", "key", "last_error", "queue", "ready_at")

    def __init__(self, key: Key) -> None:
        self.key = key
        self.queue: deque[MessageLike] = deque()
        self.batch: list[MessageLike] | None = None  # taken, not yet acknowledged
        self.attempts = 0  # failed calls of the current batch
        self.ready_at = 0.0
        self.last_error: BaseException | None = None


class HandlerSink(Sink):
    """Per-partition batches to a Python callable, with retries and a dead letter."""

    kind = "handler"

    def __init__(self, tracker: AckTracker, handler: Handler, *, batch_size: int = 1000,
                 max_retries: int = 5, retry_backoff: float = 0.5,
                 retry_backoff_max: float = 30.0, dead_letter: DeadLetter | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(tracker)
        self._handler = handler
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._backoff = Backoff(retry_backoff, retry_backoff_max)  # per partition: delay_for
        self._dead_letter = dead_letter
        self._clock = clock
        self._parts: dict[Key, _Partition] = {}
        self._last: Key | None = None
        self._inflight = 0
        self._stopping = False
        self._calls_started = 0
        self._calls_finished = 0
        self._worker: threading.Thread | None = None
        #: Messages written to the dead letter.
        self.dead_lettered = 0

    def start(self) -> None:
        self._worker = threading.Thread(target=self._work, name="zkconsumer-handler",
                                        daemon=True)
        self._worker.start()

    def submit(self, batch: Sequence[MessageLike]) -> None:
        if not batch:
            return
        groups: dict[Key, list[MessageLike]] = {}
        for m in batch:
            key = (m.topic, m.broker_id, m.partition_id)
            group = groups.get(key)
            if group is None:
                groups[key] = group = []
            group.append(m)
        tracker = self.tracker
        with tracker.cond:
            for key, group in groups.items():
                group = list(tracker.current(group))  # see Sink.submit
                if not group:
                    continue
                part = self._parts.get(key)
                if part is None:
                    self._parts[key] = part = _Partition(key)
                part.queue.extend(group)
                self._inflight += len(group)
            tracker.cond.notify_all()

    def inflight(self) -> int:
        return self._inflight

    def drain(self, timeout: float) -> bool:
        with self.tracker.cond:
            target = self._calls_started
            return self.tracker.cond.wait_for(lambda: self._calls_finished >= target, timeout)

    def abandon(self, keys: set[Key]) -> None:
        with self.tracker.cond:
            for key in keys:
                part = self._parts.pop(key, None)
                if part is not None:
                    self._inflight -= len(part.queue) + len(part.batch or ())

    def close(self, timeout: float) -> None:
        with self.tracker.cond:
            self._stopping = True
            self.tracker.cond.notify_all()
        if self._worker is not None:
            self._worker.join(timeout)
        if self._dead_letter is not None:
            self._dead_letter.close()

    # -- worker ------------------------------------------------------------------------------

    def _next_ready(self, now: float) -> tuple[_Partition | None, float]:
        """The next partition (round-robin) with work due now, else the time to wait."""
        keys = list(self._parts)
        if self._last in self._parts:
            i = keys.index(self._last) + 1  # type: ignore[arg-type]
            keys = keys[i:] + keys[:i]
        wait = 1.0
        for key in keys:
            part = self._parts[key]
            if part.batch is None and not part.queue:
                continue
            if part.ready_at <= now:
                return part, 0.0
            wait = min(wait, part.ready_at - now)
        return None, wait

    def _work(self) -> None:
        cond = self.tracker.cond
        while True:
            with cond:
                while True:
                    if self._stopping:
                        return
                    part, wait = self._next_ready(self._clock())
                    if part is not None:
                        break
                    cond.wait(wait)
                if part.batch is None:
                    n = min(self._batch_size, len(part.queue))
                    part.batch = [part.queue.popleft() for _ in range(n)]
                self._last = part.key
                batch = part.batch
                dead_letter = (self._dead_letter if part.attempts > self._max_retries
                               else None)
                self._calls_started += 1
            error: BaseException | None = None
            try:
                if dead_letter is not None:
                    dead_letter.write(batch, part.last_error or SinkError("unknown error"),
                                      part.attempts)
                else:
                    self._handler(list(batch))
            except Exception as exc:
                error = exc
            with cond:
                self._calls_finished += 1
                if self._parts.get(part.key) is not part:
                    cond.notify_all()
                    continue  # revoked meanwhile: the new owner re-reads it
                if error is None:
                    if dead_letter is not None:
                        self.dead_lettered += len(batch)
                        log.error("dead-lettered %d messages of %s/%d-%d at offsets %d..%d "
                                  "to %s after %d failed attempts", len(batch), *part.key,
                                  batch[0].offset, batch[-1].offset, dead_letter.description,
                                  part.attempts, extra={"event": "dead_letter"})
                    self.tracker.acked(batch)
                    self._inflight -= len(batch)
                    part.batch = None
                    part.attempts = 0
                    part.ready_at = 0.0
                    part.last_error = None
                else:
                    self._failed(part, batch, error, dead_letter is not None)
                cond.notify_all()

    def _failed(self, part: _Partition, batch: list[MessageLike], error: BaseException,
                was_dead_letter: bool) -> None:
        self.errors += 1
        if not was_dead_letter:
            part.attempts += 1
            part.last_error = error
        topic, broker, pid = part.key
        if was_dead_letter:
            delay = self._backoff.delay_for(part.attempts)
            part.ready_at = self._clock() + delay
            log.error("dead letter failed for %s/%d-%d: %s; retrying in %.1fs", topic, broker,
                      pid, error, delay, extra={"event": "dead_letter_error"})
            return
        calls = 1 + self._max_retries
        if self._dead_letter is None:
            of, then = "", "retrying (no dead letter: forever)"
        else:
            of, then = f"/{calls}", "retrying"
        if self._dead_letter is not None and part.attempts >= calls:
            delay, then = 0.0, "dead-lettering now"  # no retry is left to wait for
        else:
            delay = self._backoff.delay_for(part.attempts)
            then = f"{then} in {delay:.1f}s"
        part.ready_at = self._clock() + delay
        log.error("handler failed on %s/%d-%d offsets %d..%d (attempt %d%s): %r; %s",
                  topic, broker, pid, batch[0].offset, batch[-1].offset, part.attempts, of,
                  error, then, exc_info=error if part.attempts == 1 else None,
                  extra={"event": "handler_error", "attempt": part.attempts})

