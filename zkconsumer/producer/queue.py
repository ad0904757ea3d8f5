"""The async producer's bounded queue: enqueue policies, batching triggers, flush accounting.

Job: hold the messages of ``send()`` calls between the callers and the one sender thread,
bounded in *messages* like 0.7's ``queue.size``, at a cost per single-message ``send()`` that
a batch amortises: a plain lock, a list append and two counters -- no per-message object,
clock read or thread wake-up -- while sends share a topic and key (a send with a new key
starts a run: one small object and one clock read more).

Layout: a FIFO of *runs*.  A run is either one multi-message ``send()`` (`put`; it must go to
one partition whole) or consecutive single-message sends with the same topic and key
(`put_one` appends to the tail run; these may be routed one by one, see `Chunk.singles`).
The sender receives runs as `Chunk`s, so whole runs are routed, encoded and reported at once.

Enqueue policy (``queue.enqueueTimeout.ms``, AsyncProducer.scala):
    ``< 0`` block until there is room; ``0`` raise `QueueFullError` at once; ``> 0`` wait that
    long, then raise.  A ``send()`` is enqueued whole or not at all, so after a
    `QueueFullError` nothing of that call was queued.  A chunk larger than the whole queue is
    admitted when the queue is empty (otherwise it could never be sent).

Batch trigger (ProducerSendThread.scala): the sender takes a batch when ``batch.size``
messages are queued, when the oldest queued message has waited ``queue.time``, when a flush is
requested, or when the queue is closing.  A batch holds up to ``batch_size`` messages: whole
multi-message chunks (at least one chunk, even if larger), and single-message runs cut
wherever the batch is full.

Age of a run: the clock is read when a run is created, i.e. for the oldest message of the run.
When a run is cut, the part left behind keeps that (older) stamp and is sealed, so new sends
start a new run with a fresh stamp: a message may be sent *before* its ``queue.time`` is up,
never after.

Invariants: ``queued`` never exceeds ``capacity`` except by one oversized chunk admitted into
an empty queue; ``pending`` (queued + taken but not yet `done`) reaches 0 only when every
message put so far has been sent or reported failed, which is what `wait_empty` (flush) waits
for.  The clock is injectable; no method sleeps except on the queue's condition variables
(one each for the sender, blocked senders and flushers, all on one lock, so a notification
always reaches the party it is for).
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
    """Messages that go to one partition together.

    ``singles`` marks messages that came from *separate* single-message ``send()`` calls (same
    topic and key): each may be routed on its own (an unkeyed one to its own random partition),
    while a chunk of one multi-message ``send()`` (``singles=False``) is never split across
    partitions.
    """

    topic: str
    key: str | bytes | None
    payloads: Sequence[bytes]
    singles: bool = False


class _Run:
    """One queue entry (see the module docstring); ``payloads`` grows while it is the tail."""

    __slots__ = ("key", "payloads", "singles", "stamp", "topic")

    def __init__(self, stamp: float, topic: str, key: str | bytes | None,
                 payloads: list[bytes], singles: bool) -> None:
        self.stamp = stamp
        self.topic = topic
        self.key = key
        self.payloads = payloads
        self.singles = singles


class SendQueue:
    """A bounded multi-producer / single-consumer queue of messages, taken as `Chunk`s."""

    def __init__(self, capacity: int, enqueue_timeout_ms: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = capacity
        self.enqueue_timeout_ms = enqueue_timeout_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._sender_cv = threading.Condition(self._lock)   # the sender waits for a batch
        self._room_cv = threading.Condition(self._lock)     # blocked put()s wait for room
        self._empty_cv = threading.Condition(self._lock)    # flushers wait for pending == 0
        self._runs: deque[_Run] = deque()
        self._tail: _Run | None = None  # the run put_one may append to (None: start a new one)
        self._queued = 0        # messages in _runs
        self._pending = 0       # messages put and not yet done()
        self._flushes = 0       # flush requests outstanding
        self._closed = False
        self._wake_at = 1       # queued messages that make a batch due (the sender's batch_size)
        self._sender_waiting = False
        self._room_waiters = 0
        self._empty_waiters = 0

    # -- producer side -------------------------------------------------------------------------

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def pending(self) -> int:
        return self._pending

    def put_one(self, topic: str, key: str | bytes | None, payload: bytes) -> None:
        """Enqueue the one message of a ``send()``; same policy and errors as `put`.

        The hot path of the producer: when the tail run has the same topic and key and the
        queue has room, this is one lock, one append and two additions.  The sender is
        notified only when it waits and a batch has just become due.
        """
        lock = self._lock
        lock.acquire()  # not ``with``: its enter/exit protocol costs twice as much here
        try:
            queued = self._queued
            if queued < self.capacity and not self._closed:
                tail = self._tail
                if tail is not None and tail.topic == topic and tail.key == key:
                    tail.payloads.append(payload)
                else:  # a new run (e.g. every send with a new key)
                    self._tail = run = _Run(self._clock(), topic, key, [payload], True)
                    self._runs.append(run)
                self._queued = queued + 1
                self._pending += 1
                if self._sender_waiting and (queued == 0 or queued + 1 >= self._wake_at):
                    self._sender_waiting = False
                    self._sender_cv.notify()
                return
        finally:
            lock.release()
        self._put_run(topic, key, [payload], True)  # full or closed: the policy decides

    def put(self, chunk: Chunk) -> None:
        """Enqueue ``chunk`` (one ``send()``) per the policy; `QueueFullError`, or
        `ProducerError` if closed."""
        # A run that may become the tail gets a list of its own (put_one appends to it).
        payloads = list(chunk.payloads)
        self._put_run(chunk.topic, chunk.key, payloads, chunk.singles or len(payloads) == 1)

    def _put_run(self, topic: str, key: str | bytes | None, payloads: list[bytes],
                 singles: bool) -> None:
        n = len(payloads)
        with self._lock:
            if self._closed:
                raise ProducerError("producer is closed")
            if not self._has_room(n):
                self._wait_for_room(n, topic)
            tail = self._tail
            if singles and n == 1 and tail is not None and tail.topic == topic \
                    and tail.key == key:
                tail.payloads.append(payloads[0])  # room appeared while we waited
            else:
                run = _Run(self._clock(), topic, key, payloads, singles)
                self._runs.append(run)
                self._tail = run if singles else None
            was_empty = self._queued == 0
            self._queued += n
            self._pending += n
            # Wake the sender only when it has something new to decide: the first message
            # (it starts the queue.time clock) or a full batch.
            if self._sender_waiting and (was_empty or self._queued >= self._wake_at):
                self._sender_waiting = False
                self._sender_cv.notify()

    def _wait_for_room(self, n: int, topic: str) -> None:
        """Called with the lock held and no room: wait per the policy, or raise."""
        timeout = self.enqueue_timeout_ms
        if timeout == 0:
            raise QueueFullError(
                f"async queue full ({self._queued}/{self.capacity} messages); "
                f"{n} message(s) for {topic!r} not enqueued")
        deadline = None if timeout < 0 else self._clock() + timeout / 1000.0
        self._room_waiters += 1
        try:
            while not self._has_room(n):
                if self._closed:
                    raise ProducerError("producer closed while waiting for queue space")
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    raise QueueFullError(
                        f"async queue still full after {timeout} ms; {n} message(s) for "
                        f"{topic!r} not enqueued")
                self._room_cv.wait(remaining)
        finally:
            self._room_waiters -= 1

    def _has_room(self, n: int) -> bool:
        return self._queued + n <= self.capacity or self._queued == 0

    # -- sender side ---------------------------------------------------------------------------

    def take(self, batch_size: int, linger: float) -> list[Chunk]:
        """Block until a batch is due (see module docstring); ``[]`` once closed and empty."""
        batches = self.take_batches(batch_size, linger, 1)
        return batches[0] if batches else []

    def take_batches(self, batch_size: int, linger: float,
                     max_batches: int) -> list[list[Chunk]]:
        """Like `take`, then also every further *full* batch already queued, up to
        ``max_batches`` in all (a backlog is handed over in one go: one wake-up, one lock
        round, and the sender may write the batches in one request); ``[]`` once closed and
        empty.  Each batch obeys the batch rules of the module docstring."""
        with self._lock:
            self._wake_at = batch_size
            while True:
                if self._runs:
                    if (self._queued >= batch_size or self._flushes or self._closed
                            or self._clock() - self._runs[0].stamp >= linger):
                        batches = [self._pop(batch_size)]
                        while len(batches) < max_batches and self._queued >= batch_size:
                            batches.append(self._pop(batch_size))
                        return batches
                    wait: float | None = self._runs[0].stamp + linger - self._clock()
                elif self._closed:
                    return []
                else:
                    wait = None
                self._sender_waiting = True
                try:
                    self._sender_cv.wait(wait)
                finally:
                    self._sender_waiting = False

    def _pop(self, batch_size: int) -> list[Chunk]:
        batch: list[Chunk] = []
        count = 0
        runs = self._runs
        while runs:
            run = runs[0]
            n = len(run.payloads)
            room = batch_size - count
            if n <= room or (not batch and not run.singles):
                runs.popleft()
                if run is self._tail:  # seal it: it now belongs to the sender
                    self._tail = None
                batch.append(Chunk(run.topic, run.key, run.payloads, run.singles))
                count += n
                if count < batch_size:
                    continue
            elif run.singles and room > 0:  # cut it; the rest keeps its (older) stamp
                batch.append(Chunk(run.topic, run.key, run.payloads[:room], True))
                del run.payloads[:room]
                count += room
                if run is self._tail:
                    self._tail = None
            break
        self._queued -= count
        if self._room_waiters:
            self._room_cv.notify_all()
        return batch

    def done(self, n: int) -> None:
        """The sender finished ``n`` messages (sent or reported failed)."""
        with self._lock:
            self._pending -= n
            if self._pending <= 0 and self._empty_waiters:
                self._empty_cv.notify_all()

    # -- flush / close -------------------------------------------------------------------------

    def wait_empty(self, timeout: float | None = None) -> bool:
        """Ask the sender to send now and wait until nothing is pending; False on timeout."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            self._flushes += 1
            self._empty_waiters += 1
            self._sender_cv.notify()
            try:
                while self._pending > 0:
                    remaining = None if deadline is None else deadline - self._clock()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._empty_cv.wait(remaining)
                return True
            finally:
                self._flushes -= 1
                self._empty_waiters -= 1

    def close(self) -> None:
        """Refuse new messages; the sender drains what is queued and then gets ``[]``."""
        with self._lock:
            self._closed = True
            self._tail = None
            self._sender_cv.notify()
            self._room_cv.notify_all()

    def drain(self) -> list[Chunk]:
        """Remove and return everything still queued (used when the sender cannot run)."""
        with self._lock:
            chunks = [Chunk(r.topic, r.key, r.payloads, r.singles) for r in self._runs]
            self._runs.clear()
            self._tail = None
            self._queued = 0
            self._room_cv.notify_all()
            return chunks
