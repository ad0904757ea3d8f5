"""Bounded chunk queues between the fetchers and the application, with pause and revoke.

Fetchers put *chunks* -- the decoded messages of one partition's fetch answer -- into one
queue per stream (per thread id, like Scala's ``LinkedBlockingQueue(queuedchunks.max)``); the
application takes messages out through `Delivery.poll` / `Delivery.poll_batch`, which visit
the streams round-robin a chunk at a time.  A full queue blocks its fetcher: that is the
backpressure.

Invariants, all enforced under the one lock:

* A chunk is accepted only while its fetcher's `FetchHandle` is live and its partition state
  is active; accepting it is what advances ``state.fetch_offset``.  So after `stop` or
  `revoke` returns, nothing fetched by the old fetcher can be queued or handed out, and a
  discarded fetch never moves the fetch offset (no gap, no duplicate).
* `revoke` removes every queued chunk (and the current one) of the given partitions, so once
  the coordinator commits and releases them no message of theirs reaches the application.
* While paused (ZooKeeper connection suspended: ownership may be lost) nothing is handed out.
* Handing a message out sets ``consumed_offset`` and, with ``auto_ack``, ``acked_offset``
  to its ``next_offset`` -- the reference's ``consumedOffset`` semantics.

The hot path takes the lock once per `poll` call; `poll_batch` / `poll_view` hand out up to
``max_messages`` (whole chunks) per lock acquisition; `poll_view` does not even build the
`Message` objects until the application iterates (see `MessageBatch`).

A chunk holds what the fetcher decoded in the form it was decoded in: columns
(`zkconsumer.protocol.MessageBatch`: int64 offsets and one payload buffer, no Python object
per message) or a list of ``(offset, next_offset, payload)`` tuples.  `poll_columns` hands
columns out as they are -- the batch path, no per-message work at all; the per-message APIs
turn a chunk's columns into tuples once, when they first need them (and the other way
round).  Fetchers decode into the form the application polled last (`wants_columns`), so
neither path pays for a conversion in steady state.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from zkconsumer.consumer.columns import Columns
from zkconsumer.consumer.message import (
    ConsumerStats,
    Decoded,
    Message,
    MessageBatch,
    PartitionState,
    Segment,
)
from zkconsumer.protocol.batch import MessageBatch as ColumnBatch

__all__ = ["Chunk", "Delivery", "FetchHandle"]


class FetchHandle:
    """The token of one fetcher run; stopping it invalidates everything it still fetches."""

    __slots__ = ("stopped",)

    def __init__(self) -> None:
        self.stopped = False


class Chunk:
    """Messages of one fetch answer for one partition (or an error to raise in its place)."""

    __slots__ = ("_messages", "columns", "count", "end_offset", "error", "fetch_offset", "pos",
                 "size", "state")

    def __init__(self, state: PartitionState, fetch_offset: int, end_offset: int,
                 messages: Decoded | ColumnBatch, error: BaseException | None = None) -> None:
        self.state = state
        self.fetch_offset = fetch_offset
        self.end_offset = end_offset
        if isinstance(messages, ColumnBatch):
            self.columns: ColumnBatch | None = messages
            self._messages: Decoded | None = None
        else:
            self.columns = None
            self._messages = messages
        self.count = len(messages)
        self.pos = 0
        self.size = end_offset - fetch_offset
        self.error = error

    @property
    def messages(self) -> Decoded:
        """The tuples form (built from the columns once, on first use)."""
        if self._messages is None:
            columns = self.columns
            self._messages = columns.messages() if columns is not None else []
        return self._messages

    def next_offset(self, i: int) -> int:
        columns = self.columns
        if columns is not None:
            return int(columns.next_offsets[i])
        return self.messages[i][1]

    def as_columns(self) -> ColumnBatch:
        """The columns form (built from tuples for chunks decoded that way)."""
        if self.columns is None:
            self.columns = ColumnBatch.from_messages(self.messages)
        return self.columns


class Delivery:
    """See the module docstring."""

    def __init__(self, capacity: int, auto_ack: bool, stats: ConsumerStats,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._capacity = capacity
        self._auto_ack = auto_ack
        self._stats = stats
        self._clock = clock
        self._lock = threading.Lock()
        self._readable = threading.Condition(self._lock)
        self._writable = threading.Condition(self._lock)
        self._queues: dict[str, deque[Chunk]] = {}
        self._rr = 0
        self._current: Chunk | None = None
        self._paused = False
        self._closed = False
        #: The application's last poll was `poll_columns`: fetchers decode into columns.
        self.wants_columns = False

    # -- fetcher side -------------------------------------------------------------------------

    def put(self, handle: FetchHandle, state: PartitionState, fetch_offset: int,
            end_offset: int, messages: Decoded | ColumnBatch) -> bool:
        """Queue a chunk, blocking while its stream's queue is full.

        Returns False (chunk dropped) if the handle was stopped, the state revoked or the
        delivery closed -- the fetcher should then stop.
        """
        with self._lock:
            queue = self._queues.get(state.thread_id)
            if queue is None:
                queue = self._queues[state.thread_id] = deque()
            while (len(queue) >= self._capacity and not handle.stopped and state.active
                   and not self._closed):
                self._writable.wait()
            if handle.stopped or not state.active or self._closed:
                return False
            if state.fetch_offset != fetch_offset:  # reset in between: this answer is stale
                return True
            queue.append(Chunk(state, fetch_offset, end_offset, messages))
            state.fetch_offset = end_offset
            self._readable.notify()
            return True

    def put_error(self, handle: FetchHandle, state: PartitionState, error: BaseException) -> bool:
        """Park the partition (``state.error``) and queue ``error`` for the application."""
        with self._lock:
            if handle.stopped or not state.active or self._closed:
                return False
            state.error = error
            queue = self._queues.setdefault(state.thread_id, deque())
            offset = state.fetch_offset if state.fetch_offset is not None else -1
            queue.append(Chunk(state, offset, offset, [], error))
            self._readable.notify()
            return True

    def reset(self, handle: FetchHandle, state: PartitionState, offset: int) -> bool:
        """Auto offset reset: drop the partition's queued chunks and move it to ``offset``."""
        with self._lock:
            if handle.stopped or not state.active or self._closed:
                return False
            self._drop_locked(lambda s: s is state)
            state.reset_to(offset)
            return True

    def stop(self, handles: Iterable[FetchHandle]) -> None:
        """Invalidate fetcher runs and wake any of them blocked on a full queue."""
        with self._lock:
            for handle in handles:
                handle.stopped = True
            self._writable.notify_all()

    # -- coordinator side ---------------------------------------------------------------------

    def revoke(self, states: Iterable[PartitionState]) -> None:
        """Deactivate partitions and drop their queued and current chunks."""
        with self._lock:
            gone = set()
            for state in states:
                state.active = False
                gone.add(id(state))
            self._drop_locked(lambda s: id(s) in gone)
            self._writable.notify_all()

    def _drop_locked(self, doomed: Callable[[PartitionState], bool]) -> None:
        for stream, queue in list(self._queues.items()):
            if any(doomed(c.state) for c in queue):
                kept = deque(c for c in queue if not doomed(c.state))
                self._queues[stream] = kept
        if self._current is not None and doomed(self._current.state):
            self._current = None
        self._writable.notify_all()

    def pause(self) -> None:
        with self._lock:
            self._paused = True

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self._readable.notify_all()

    @property
    def paused(self) -> bool:
        return self._paused

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._queues.clear()
            self._current = None
            self._readable.notify_all()
            self._writable.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def queued_chunks(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    # -- application side ---------------------------------------------------------------------

    def _next_chunk_locked(self) -> Chunk | None:
        """The current chunk if it has messages left, else the next queued one (round-robin)."""
        current = self._current
        if current is not None and current.pos < current.count:
            return current
        self._current = None
        streams = list(self._queues.values())
        n = len(streams)
        for i in range(n):
            queue = streams[(self._rr + i) % n]
            while queue:
                chunk = queue.popleft()
                self._writable.notify()
                state = chunk.state
                if chunk.error is None and state.consumed_offset != chunk.fetch_offset:
                    # Scala logs "Consumer may lose data"; it cannot happen here because
                    # fetch offsets only advance with accepted chunks, but stay safe.
                    state.consumed_offset = chunk.fetch_offset
                if chunk.error is None and not chunk.count:
                    # e.g. a compressed wrapper around an empty set: nothing to hand out,
                    # but the position moves past it.
                    self._pass_empty_locked(chunk)
                    continue
                self._rr = (self._rr + i + 1) % n
                self._current = chunk
                return chunk
        return None

    def _pass_empty_locked(self, chunk: Chunk) -> None:
        state = chunk.state
        if self._auto_ack or state.acked_offset == state.consumed_offset:
            state.acked_offset = chunk.end_offset
        state.consumed_offset = chunk.end_offset
        self._stats.bytes += chunk.size

    def _wait_locked(self, deadline: float | None) -> Chunk | None:
        """Wait for a chunk to hand out; None on timeout or close."""
        while True:
            if self._closed:
                return None
            if not self._paused:
                chunk = self._next_chunk_locked()
                if chunk is not None:
                    if chunk.error is not None:
                        self._current = None
                        raise chunk.error
                    return chunk
            if deadline is None:
                self._readable.wait()
            else:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return None
                self._readable.wait(remaining)

    def poll(self, timeout: float | None) -> Message | None:
        """One message, or None after ``timeout`` seconds (None = wait forever) or on close.

        Raises an error a fetcher queued for a partition (e.g. `MessageTooLargeError`) once.
        """
        self.wants_columns = False
        deadline = None if timeout is None else self._clock() + timeout
        with self._lock:
            chunk = self._wait_locked(deadline)
            if chunk is None:
                return None
            offset, next_offset, value = chunk.messages[chunk.pos]
            chunk.pos += 1
            state = chunk.state
            state.consumed_offset = next_offset
            if self._auto_ack:
                state.acked_offset = next_offset
            stats = self._stats
            stats.messages += 1
            if chunk.pos >= chunk.count:
                stats.bytes += chunk.size
                self._current = None
            return Message(state.topic, state.broker_id, state.partition_id, offset,
                           next_offset, value, state)

    def poll_batch(self, max_messages: int, timeout: float | None) -> list[Message]:
        """Up to ``max_messages`` messages: waits for the first, then takes what is queued."""
        out: list[Message] = []
        for state, messages, start, end in self._take(max_messages, timeout):
            topic, broker, part = state.topic, state.broker_id, state.partition_id
            out.extend([Message(topic, broker, part, o, n, v, state)
                        for o, n, v in messages[start:end]])
        return out

    def poll_view(self, max_messages: int, timeout: float | None) -> MessageBatch:
        """Like `poll_batch`, but `Message` objects are built only while iterating.

        Short-lived messages are freed by reference counting as the application moves on,
        instead of piling up as a list of survivors for the cyclic GC to walk: that is most
        of the hot path's cost at a million messages per second.
        """
        return MessageBatch(self._take(max_messages, timeout))

    def poll_columns(self, max_messages: int, timeout: float | None) -> Columns:
        """Like `poll_view`, as columns: no Python object per message (see `Columns`)."""
        self.wants_columns = True
        return Columns([(state, chunk.as_columns(), start, end)
                        for state, chunk, start, end in self._take_chunks(max_messages,
                                                                          timeout)])

    def _take(self, max_messages: int, timeout: float | None) -> list[Segment]:
        """Hand out up to ``max_messages`` (positions updated) as tuple segments."""
        self.wants_columns = False
        return [(state, chunk.messages, start, end)
                for state, chunk, start, end in self._take_chunks(max_messages, timeout)]

    def _take_chunks(self, max_messages: int,
                     timeout: float | None) -> list[tuple[PartitionState, Chunk, int, int]]:
        """Hand out up to ``max_messages`` (positions updated) as chunk runs."""
        deadline = None if timeout is None else self._clock() + timeout
        out: list[tuple[PartitionState, Chunk, int, int]] = []
        taken = 0
        with self._lock:
            chunk = self._wait_locked(deadline)
            stats = self._stats
            while chunk is not None:
                start = chunk.pos
                end = min(chunk.count, start + max_messages - taken)
                state = chunk.state
                out.append((state, chunk, start, end))
                taken += end - start
                chunk.pos = end
                last_next = chunk.next_offset(end - 1)
                state.consumed_offset = last_next
                if self._auto_ack:
                    state.acked_offset = last_next
                stats.messages += end - start
                if end >= chunk.count:
                    stats.bytes += chunk.size
                    self._current = None
                if taken >= max_messages or self._paused:
                    break
                chunk = self._next_chunk_locked()
                if chunk is not None and chunk.error is not None:
                    # Deliver what we have; the error comes with the next call.
                    chunk.pos = 0
                    self._current = chunk
                    self._requeue_error_locked(chunk)
                    break
        return out

    def _requeue_error_locked(self, chunk: Chunk) -> None:
        """Put an error chunk back at the front of its stream so the next poll raises it."""
        self._current = None
        self._queues.setdefault(chunk.state.thread_id, deque()).appendleft(chunk)
