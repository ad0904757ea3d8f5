"""The async producer's bounded queue: enqueue policies, batching triggers, flush accounting.

Job: hold `Chunk`s (one ``send()`` call each: topic, key, payloads) between the caller and the
sender thread, bounded in *messages* like 0.7's ``queue.size``.

Enqueue policy (``queue.enqueueTimeout.ms``, AsyncProducer.scala):
    ``< 0`` block until there is room; ``0`` raise `QueueFullError` at once; ``> 0`` wait that
    long, then raise.  A chunk is enqueued whole or not at all, so after a `QueueFullError`
    nothing of that ``send()`` was queued.  A chunk larger than the whole queue is admitted
    when the queue is empty (otherwise it could never be sent).

Batch trigger (ProducerSendThread.scala): the sender takes a batch when ``batch.size``
messages are queued, when the oldest queued chunk has waited ``queue.time``, when a flush is
requested, or when the queue is closing.  A batch is whole chunks, up to ``batch_size``
messages (at least one chunk).

Invariants: ``pending`` (queued + taken but not yet `done`) reaches 0 only when every message
put so far has been sent or reported failed, which is what `wait_empty` (flush) waits for.
The clock is injectable; no method sleeps except on the queue's condition variable.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import NamedTuple

from zkconsumer.errors import ProducerError, QueueFullError

__all__ = ["Chunk", "SendQueue"]


class Chunk(NamedTuple):
    """The messages of one ``send()``: they go to one partition together."""

    topic: str
    key: str | bytes | None
    payloads: Sequence[bytes]


class SendQueue:
    """A bounded multi-producer / single-consumer queue of `Chunk`s."""

    def __init__(self, capacity: int, enqueue_timeout_ms: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.enqueue_timeout_ms = enqueue_timeout_ms
        self._clock = clock
        self._cond = threading.Condition()
        self._items: deque[tuple[float, Chunk]] = deque()
        self._queued = 0        # messages in _items
        self._pending = 0       # messages put and not yet done()
        self._flushes = 0       # flush requests outstanding
        self._closed = False
        self._wake_at = 1       # queued messages that make a batch due (the sender's batch_size)

    # -- producer side -------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def pending(self) -> int:
        return self._pending

    def put(self, chunk: Chunk) -> None:
        """Enqueue ``chunk`` per the policy; `QueueFullError` / `ProducerError` if closed."""
        n = len(chunk.payloads)
        with self._cond:
            if self._closed:
                raise ProducerError("producer is closed")
            if not self._has_room(n):
                timeout = self.enqueue_timeout_ms
                if timeout == 0:
                    raise QueueFullError(
                        f"async queue full ({self._queued}/{self.capacity} messages); "
                        f"{n} message(s) for {chunk.topic!r} not enqueued")
                deadline = None if timeout < 0 else self._clock() + timeout / 1000.0
                while not self._has_room(n):
                    if self._closed:
                        raise ProducerError("producer closed while waiting for queue space")
                    remaining = None if deadline is None else deadline - self._clock()
                    if remaining is not None and remaining <= 0:
                        raise QueueFullError(
                            f"async queue still full after {timeout} ms; {n} message(s) for "
                            f"{chunk.topic!r} not enqueued")
                    self._cond.wait(remaining)
            was_empty = not self._items
            self._items.append((self._clock(), chunk))
            self._queued += n
            self._pending += n
            # Wake the sender only when it has something new to decide: the first chunk
            # (it starts the queue.time clock) or a full batch.  Waking it on every put
            # costs more than the put itself.
            if was_empty or self._queued >= self._wake_at:
                self._cond.notify_all()

    def _has_room(self, n: int) -> bool:
        return self._queued + n <= self.capacity or self._queued == 0

    # -- sender side ---------------------------------------------------------------------------

    def take(self, batch_size: int, linger: float) -> list[Chunk]:
        """Block until a batch is due (see module docstring); ``[]`` once closed and empty."""
        with self._cond:
            self._wake_at = batch_size
            while True:
                if self._items:
                    if (self._queued >= batch_size or self._flushes or self._closed
                            or self._clock() - self._items[0][0] >= linger):
                        return self._pop(batch_size)
                    wait: float | None = self._items[0][0] + linger - self._clock()
                elif self._closed:
                    return []
                else:
                    wait = None
                self._cond.wait(wait)

    def _pop(self, batch_size: int) -> list[Chunk]:
        batch: list[Chunk] = []
        count = 0
        while self._items and (not batch or count + len(self._items[0][1].payloads)
                               <= batch_size):
            _, chunk = self._items.popleft()
            batch.append(chunk)
            count += len(chunk.payloads)
        self._queued -= count
        self._cond.notify_all()  # room for blocked put()s
        return batch

    def done(self, n: int) -> None:
        """The sender finished ``n`` messages (sent or reported failed)."""
        with self._cond:
            self._pending -= n
            if self._pending <= 0:
                self._cond.notify_all()

    # -- flush / close -------------------------------------------------------------------------

    def wait_empty(self, timeout: float | None = None) -> bool:
        """Ask the sender to send now and wait until nothing is pending; False on timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            self._flushes += 1
            self._cond.notify_all()
            try:
                while self._pending > 0:
                    remaining = None if deadline is None else deadline - self._clock()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._cond.wait(remaining)
                return True
            finally:
                self._flushes -= 1

    def close(self) -> None:
        """Refuse new chunks; the sender drains what is queued and then gets ``[]``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def drain(self) -> list[Chunk]:
        """Remove and return everything still queued (used when the sender cannot run)."""
        with self._cond:
            chunks = [c for _, c in self._items]
            self._items.clear()
            self._queued = 0
            self._cond.notify_all()
            return chunks
