"""`Columns`: what `GroupConsumer.poll_columns` hands out -- the consumer's batch path.

A poll's messages as runs of whole fetch answers, one run per partition answer, each in the
columnar form the fetcher decoded it into (`zkconsumer.protocol.MessageBatch`: int64
offsets and next offsets, one buffer holding every payload back to back).  Nothing is built
per message: an application that writes payloads out, hashes them or hands them to Arrow
pays per batch, not per message, which is what lets one member keep up with several
brokers on one core.

Invariants (the same as `poll_batch`): every message of a `Columns` counts as handed out
when the poll returns (with ``auto_ack``, as acknowledged); `PartitionRun.next_offset` is
the offset to commit once the run's last message was processed -- ``GroupConsumer.ack_run``
(or ``ack`` of `PartitionRun.last_message`) acknowledges the run and everything before it
in its partition; runs of one partition come in offset order; a run's `claim` identifies
the claim it was handed out under (see `zkconsumer.consumer.message`).
"""

from __future__ import annotations

from collections.abc import Iterator

from zkconsumer.consumer.message import Message, PartitionState
from zkconsumer.protocol.batch import MessageBatch as ColumnBatch

__all__ = ["ColumnSegment", "Columns", "PartitionRun"]

#: ``(state, columns, start, end)``: messages ``start..end-1`` of one decoded fetch answer.
ColumnSegment = tuple[PartitionState, ColumnBatch, int, int]


class PartitionRun:
    """Consecutive messages of one partition: views into the fetch answer's columns."""

    __slots__ = ("_batch", "_end", "_start", "_state")

    def __init__(self, state: PartitionState, batch: ColumnBatch, start: int, end: int) -> None:
        self._state = state
        self._batch = batch
        self._start = start
        self._end = end

    @property
    def topic(self) -> str:
        return self._state.topic

    @property
    def partition(self) -> str:
        """The 0.7 partition name ``"B-P"``."""
        return self._state.name

    @property
    def broker_id(self) -> int:
        return self._state.broker_id

    @property
    def partition_id(self) -> int:
        return self._state.partition_id

    @property
    def claim(self) -> int:
        return self._state.claim

    def __len__(self) -> int:
        return self._end - self._start

    def slice(self, start: int, end: int | None = None) -> PartitionRun:
        """Messages ``start..end-1`` of this run (indices relative to it) as a run of their
        own: the same views, same claim.  A sink that acknowledges part of a run (an exec
        child's ``ack N``) acknowledges such a slice.  ``start < end <= len(self)``."""
        n = self._end - self._start
        stop = n if end is None else end
        if not 0 <= start < stop <= n:
            raise IndexError(f"slice {start}:{stop} of a run of {n} messages")
        return PartitionRun(self._state, self._batch, self._start + start, self._start + stop)

    @property
    def offsets(self) -> memoryview:
        """int64 byte offsets of the messages (the shallow entry holding each)."""
        return memoryview(self._batch.offsets)[self._start:self._end]

    @property
    def next_offsets(self) -> memoryview:
        """int64 offsets to commit after each message (reference wrapper semantics)."""
        return memoryview(self._batch.next_offsets)[self._start:self._end]

    @property
    def next_offset(self) -> int:
        """What a commit writes once this run was processed."""
        return int(self._batch.next_offsets[self._end - 1])

    @property
    def payload_bytes(self) -> int:
        ends = self._batch.value_offsets
        return int(ends[self._end] - ends[self._start])

    def payload_view(self) -> memoryview:
        """Every payload of the run back to back (split them with `payload_ends`)."""
        ends = self._batch.value_offsets
        return memoryview(self._batch.values)[ends[self._start]:ends[self._end]]

    def payload_ends(self) -> list[int]:
        """End of each payload within `payload_view` (the first starts at 0)."""
        ends = self._batch.value_offsets
        base = ends[self._start]
        return [e - base for e in ends[self._start + 1:self._end + 1]]

    def values(self) -> Iterator[bytes]:
        """Each payload as bytes (one object per message: for applications that need it)."""
        values, ends = self._batch.values, self._batch.value_offsets
        for i in range(self._start, self._end):
            yield values[ends[i]:ends[i + 1]]

    def last_message(self) -> Message:
        """The run's last message: acknowledging it acknowledges the whole run."""
        batch, i = self._batch, self._end - 1
        state = self._state
        ends = batch.value_offsets
        return Message(state.topic, state.broker_id, state.partition_id, int(batch.offsets[i]),
                       int(batch.next_offsets[i]), batch.values[ends[i]:ends[i + 1]], state)

    def messages(self) -> Iterator[Message]:
        """`Message` objects, built while iterating (the per-message API's objects)."""
        state, batch = self._state, self._batch
        values, ends = batch.values, batch.value_offsets
        offsets, nexts = batch.offsets, batch.next_offsets
        topic, broker, part = state.topic, state.broker_id, state.partition_id
        for i in range(self._start, self._end):
            yield Message(topic, broker, part, offsets[i], nexts[i],
                          values[ends[i]:ends[i + 1]], state)

    def __repr__(self) -> str:
        return (f"<PartitionRun {self.topic}/{self.partition} {len(self)} messages "
                f"next_offset={self.next_offset}>")


class Columns:
    """One `GroupConsumer.poll_columns` result: `PartitionRun` objects in delivery order."""

    __slots__ = ("_len", "_segments")

    def __init__(self, segments: list[ColumnSegment]) -> None:
        self._segments = segments
        self._len = sum(end - start for _, _, start, end in segments)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def runs(self) -> list[PartitionRun]:
        return [PartitionRun(*segment) for segment in self._segments]

    def __iter__(self) -> Iterator[PartitionRun]:
        return iter(self.runs())

    @property
    def payload_bytes(self) -> int:
        total = 0
        for _, batch, start, end in self._segments:
            ends = batch.value_offsets
            total += ends[end] - ends[start]
        return int(total)

    def messages(self) -> Iterator[Message]:
        """Every message as a `Message`, in delivery order."""
        for run in self.runs():
            yield from run.messages()

    def last_per_partition(self) -> list[Message]:
        """The last message of each partition: ``ack`` these to acknowledge everything."""
        last: dict[int, PartitionRun] = {}
        for run in self.runs():
            last[id(run._state)] = run
        return [run.last_message() for run in last.values()]

    def __repr__(self) -> str:
        return f"<Columns {self._len} messages in {len(self._segments)} runs>"
