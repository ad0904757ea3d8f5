"""The value types of the consumer: `Message`, per-partition state, listeners and stats.

`Message` is what the application gets, built one per message on the per-message path: its
fields live in a compiled base (``_speedups.Record``: a C constructor, about 0.15 us against
0.28 us for a Python ``__init__`` on CPython 3.11, which is most of what the per-message API
costs) when the extension is built, else in `_MessageFields` (``__slots__``, the same fields,
the same constructor signature).  Either way a message is a value: nothing in the package
assigns to its fields, and the compiled base makes them read-only.  Its ``offset`` / ``next_offset``
are 0.7 *byte* offsets with the reference semantics: ``next_offset`` is what gets committed
once the message is acknowledged, and for the inner messages of a compressed wrapper it is
the wrapper's start (all but the last) or end (the last), so a commit in the middle of a
compressed set replays the whole set (REFERENCE §4.5).

`PartitionState` is the consumer's record of one owned partition.  A new one is created
every time the partition is claimed.  Revoking it first clears ``active`` (no more fetching
or handing out), then -- after the listeners' ``on_revoked`` and the final commit -- sets
``released``.  A `Message` keeps a reference to the state it came from, so an ``ack`` that
arrives after that (a *stale generation*) is recognised and ignored.

Each state also carries a **claim number** (`PartitionState.claim`, exposed as
`Message.claim`): unique in the process and increasing with every claim, so "was this
message handed out under a claim that has since been revoked?" is answered from the message
alone (`latest_claim` read when partitions are revoked bounds every claim revoked then).
Layers above (the daemon's ack ledger, the mirror) rely on it instead of guessing from the
time they polled: a message of a *new* claim of the same partition -- the same member
re-claiming it a few milliseconds later -- must be delivered, one of the old claim must not.

Offsets inside a state (all byte offsets of the next message):

* ``fetch_offset`` -- where the fetcher asks next; advanced only when a chunk is accepted into
  the delivery queues (under the delivery lock), so a discarded fetch never skips data.
  ``None`` until the ``autooffset.reset`` lookup resolved it.
* ``consumed_offset`` -- past the last message handed to the application.
* ``acked_offset`` -- past the last *acknowledged* message; what a commit writes.
* ``committed_offset`` -- what ZooKeeper holds (``None``: nothing or unknown, so the next
  commit writes even an unchanged offset).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from zkconsumer.protocol import accel

__all__ = ["ConsumerListener", "ConsumerStats", "Message", "MessageBatch", "PartitionState",
           "latest_claim"]

#: Decoded messages of one fetch answer: ``(offset, next_offset, payload)``.
Decoded = list[tuple[int, int, bytes]]


class _ClaimCounter:
    """Process-wide claim numbers: 1, 2, 3, ... (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latest = 0

    def next(self) -> int:
        with self._lock:
            self.latest += 1
            return self.latest


_CLAIMS = _ClaimCounter()


def latest_claim() -> int:
    """The highest claim number handed out so far: every existing claim is ``<=`` it.

    Read in a revocation listener (before the rebalance claims anything new), it bounds the
    claims being revoked: any later claim of the same partition gets a larger number.
    """
    return _CLAIMS.latest


class PartitionState:
    """Mutable state of one owned partition (see the module docstring)."""

    __slots__ = ("acked_offset", "active", "broker_id", "claim", "committed_offset",
                 "consumed_offset", "error", "fetch_offset", "fetch_size", "key", "log_end",
                 "name", "partition_id", "released", "thread_id", "topic")

    def __init__(self, topic: str, broker_id: int, partition_id: int, thread_id: str,
                 offset: int | None, committed: int | None, fetch_size: int) -> None:
        self.topic = topic
        self.broker_id = broker_id
        self.partition_id = partition_id
        self.name = f"{broker_id}-{partition_id}"
        self.key = (topic, self.name)
        self.thread_id = thread_id
        self.claim = _CLAIMS.next()
        self.fetch_offset = offset
        self.consumed_offset = offset
        self.acked_offset = offset
        self.committed_offset = committed
        self.fetch_size = fetch_size
        self.active = True  # fetched and delivered; cleared first when revoking
        self.released = False  # acks still count until the final commit sets this
        self.error: BaseException | None = None
        self.log_end: int | None = None

    def reset_to(self, offset: int) -> None:
        """Move every position to ``offset`` (auto offset reset)."""
        self.fetch_offset = self.consumed_offset = self.acked_offset = offset

    def __repr__(self) -> str:
        return (f"<PartitionState {self.topic}/{self.name} thread={self.thread_id} "
                f"fetch={self.fetch_offset} consumed={self.consumed_offset} "
                f"acked={self.acked_offset} committed={self.committed_offset} "
                f"active={self.active}>")


class _MessageFields:
    """The fields of `Message` in pure Python (its base when the extension is not built)."""

    __slots__ = ("_state", "broker_id", "next_offset", "offset", "partition_id", "topic",
                 "value")

    def __init__(self, topic: str, broker_id: int, partition_id: int, offset: int,
                 next_offset: int, value: bytes, state: PartitionState | None = None) -> None:
        self.topic = topic
        self.broker_id = broker_id
        self.partition_id = partition_id
        self.offset = offset
        self.next_offset = next_offset
        self.value = value
        self._state = state


if TYPE_CHECKING:
    _Fields = _MessageFields
else:  # the compiled Record has the same constructor and (read-only) fields
    _Fields = accel.speedups.Record if accel.speedups is not None else _MessageFields


class Message(_Fields):
    """One consumed message.  ``partition`` is the 0.7 partition name ``"B-P"``.

    ``Message(topic, broker_id, partition_id, offset, next_offset, value, state=None)``.
    """

    __slots__ = ()

    @property
    def partition(self) -> str:
        return f"{self.broker_id}-{self.partition_id}"

    @property
    def claim(self) -> int:
        """The claim this message was handed out under (0: not from a group consumer)."""
        state = self._state
        return state.claim if state is not None else 0

    def __repr__(self) -> str:
        return (f"Message(topic={self.topic!r}, partition={self.partition!r}, "
                f"offset={self.offset}, next_offset={self.next_offset}, "
                f"value=<{len(self.value)} bytes>)")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.topic, self.broker_id, self.partition_id, self.offset, self.next_offset,
                self.value) == (other.topic, other.broker_id, other.partition_id, other.offset,
                                other.next_offset, other.value)

    def __hash__(self) -> int:
        return hash((self.topic, self.broker_id, self.partition_id, self.offset,
                     self.next_offset))

    def __reduce__(self) -> tuple[type[Message], tuple[Any, ...]]:
        """Pickle and copy by the constructor's arguments (the same on both bases)."""
        return (Message, (self.topic, self.broker_id, self.partition_id, self.offset,
                          self.next_offset, self.value, self._state))


#: A run of handed-out messages of one chunk: ``(state, decoded, start, end)``.
Segment = tuple[PartitionState, Decoded, int, int]


class MessageBatch(Sequence[Message]):
    """Messages handed out by `GroupConsumer.poll_view`, built on access.

    A read-only sequence: ``len()``, iteration and indexing give `Message` objects created
    on the fly (identical to what `poll_batch` returns); `values` yields only the payloads.
    The messages count as handed out (and, with ``auto_ack``, acknowledged) already.
    """

    __slots__ = ("_len", "_segments")

    def __init__(self, segments: list[Segment]) -> None:
        self._segments = segments
        self._len = sum(end - start for _, _, start, end in segments)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Message]:
        for state, decoded, start, end in self._segments:
            topic, broker, part = state.topic, state.broker_id, state.partition_id
            for i in range(start, end):
                o, n, v = decoded[i]
                yield Message(topic, broker, part, o, n, v, state)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("MessageBatch index out of range")
        for state, decoded, start, end in self._segments:
            if index < end - start:
                o, n, v = decoded[start + index]
                return Message(state.topic, state.broker_id, state.partition_id, o, n, v,
                               state)
            index -= end - start
        raise IndexError("MessageBatch index out of range")  # pragma: no cover

    def values(self) -> Iterator[bytes]:
        """Just the payloads, in order (no `Message` objects at all)."""
        for _, decoded, start, end in self._segments:
            for i in range(start, end):
                yield decoded[i][2]

    def runs(self) -> list[Segment]:
        """The batch as runs of one claim's messages: ``(state, decoded, start, end)`` with
        ``decoded[i] = (offset, next_offset, payload)`` -- for hot loops that want neither
        `Message` objects nor columns (``state.claim`` and ``state.key`` identify the run)."""
        return list(self._segments)

    def last_per_partition(self) -> list[Message]:
        """The last message of each partition in the batch: ack these to ack everything."""
        last: dict[int, Message] = {}
        for state, decoded, start, end in self._segments:
            if end > start:
                o, n, v = decoded[end - 1]
                last[id(state)] = Message(state.topic, state.broker_id, state.partition_id,
                                          o, n, v, state)
        return list(last.values())

    def __repr__(self) -> str:
        return f"<MessageBatch of {self._len} messages>"


class ConsumerListener:
    """Callbacks about the group; subclass and override what you need.

    All callbacks run on the consumer's coordinator thread (never on kazoo's), one at a time.
    ``partitions`` is ``{topic: ["B-P", ...]}``.

    * `on_revoked` runs BEFORE the offsets of those partitions are committed and their owner
      znodes released: flush or ``ack`` in-flight work there and it will be committed.
      After it returns, acks for those partitions are ignored.
    * `on_assigned` runs after the owner znodes were claimed.
    * `on_state` reports ``STARTING``, ``REBALANCING``, ``STABLE``, ``SUSPENDED`` (ZooKeeper
      connection lost: delivery paused), ``RESUMED``, ``SESSION_LOST``, ``REBALANCE_FAILED``,
      ``CLOSED``.
    """

    def on_assigned(self, partitions: dict[str, list[str]]) -> None:
        """Partitions newly owned by this member."""

    def on_revoked(self, partitions: dict[str, list[str]]) -> None:
        """Partitions about to be released."""

    def on_state(self, state: str) -> None:
        """The member's state changed."""


@dataclass
class ConsumerStats:
    """Counters of one `GroupConsumer` (read them; the consumer updates them).

    ``bytes`` counts message-set bytes handed out (the shallow, on-wire size, which is what
    offsets advance by).  ``partitions`` is refreshed by `GroupConsumer.stats`:
    ``{"topic/B-P": {"consumed": .., "acked": .., "committed": .., "fetched": ..,
    "log_end": .. or None, "lag": .. or None}}`` -- ``log_end`` is known when the fetcher
    reached the end of the log (an empty fetch); lag is in bytes like ConsumerOffsetChecker.
    """

    messages: int = 0
    bytes: int = 0
    rebalances: int = 0
    failed_rebalances: int = 0
    rebalance_attempts: int = 0
    commits: int = 0
    commit_failures: int = 0
    offsets_written: int = 0
    last_commit_latency: float | None = None
    last_rebalance_duration: float | None = None
    session_expirations: int = 0
    partitions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages, "bytes": self.bytes, "rebalances": self.rebalances,
            "failed_rebalances": self.failed_rebalances,
            "rebalance_attempts": self.rebalance_attempts, "commits": self.commits,
            "commit_failures": self.commit_failures, "offsets_written": self.offsets_written,
            "last_commit_latency": self.last_commit_latency,
            "last_rebalance_duration": self.last_rebalance_duration,
            "session_expirations": self.session_expirations,
            "partitions": {k: dict(v) for k, v in self.partitions.items()},
        }
