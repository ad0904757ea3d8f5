"""An exactly-once lane: one owned 0.7 partition, its transactional producer and open
transaction (`zkconsumer.mirror.exactly_once` drives it; its claim is `eos_claim`).

A lane's state is a `zkconsumer.mirror.lanes.LaneStatus` (CLAIMING -> ACTIVE <-> FAILED ->
RELEASED | FENCED); everything else here is the data of the open transaction:

* ``buffer`` -- the messages produced into it, kept for a resend (`Pending`);
* ``tail`` -- the last message *handled* (produced, or skipped as already visible): the
  transaction's checkpoint and acknowledgement cover it;
* ``resume`` / ``already`` -- the committed position ``(0.7 offset, index in its set)`` and
  records visible past it (a broker that shows aborted transactions) that must not be written
  again;
* ``positions`` / ``base`` -- per target partition an offset at or below every later record
  of this lane (moved by delivery reports), and as of the last committed checkpoint.

Invariant: every record carries the provenance headers (`headers`); a lane is touched only
under the mirror's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from zkconsumer.consumer.message import Decoded, Message, MessageBatch, PartitionState
from zkconsumer.mirror.checkpoints import HEADER_INDEX, HEADER_OFFSET, HEADER_SOURCE, Checkpoint
from zkconsumer.mirror.lanes import LaneStatus

if TYPE_CHECKING:
    from confluent_kafka import Message as KafkaMessage
    from confluent_kafka import Producer

__all__ = ["EosLane", "Headers", "Pending", "Run", "headers", "runs", "send_record",
           "transactional_id"]

log = logging.getLogger(__name__)

Headers = list[tuple[str, str | bytes | None]]  # confluent-kafka's header list type


def transactional_id(group: str, topic: str, partition: str) -> str:
    """The id that follows a source partition from owner to owner (exactly_once.py)."""
    return f"zkconsumer-mirror.{group}.{topic}.{partition}"


def headers(source: bytes, offset: int, index: int) -> Headers:
    """The provenance headers of one mirrored record (checkpoints.py)."""
    return [(HEADER_SOURCE, source), (HEADER_OFFSET, b"%d" % offset),
            (HEADER_INDEX, b"0" if index == 0 else b"%d" % index)]


def send_record(producer: Producer, topic: str, value: bytes, partition: int,
                key: bytes | None, hdrs: Headers,
                on_delivery: Callable[[Any, Any], None] | None = None) -> None:
    """``produce``, waiting while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, key, partition, headers=hdrs,
                             on_delivery=on_delivery)
            return
        except BufferError:  # librdkafka's queue is full: let it drain
            producer.poll(0.05)


class Pending(NamedTuple):
    """A message of the open transaction, kept for a resend."""

    offset: int
    next_offset: int
    set_index: int  # position inside its compressed 0.7 set (0 for a plain message)
    value: bytes
    partition: int  # target partition, -1 = by key
    key: bytes | None


class Run(NamedTuple):
    """Consecutive messages of one claim of one partition: ``decoded[start:end]``."""

    key: tuple[str, str]
    claim: int
    decoded: Decoded
    start: int
    end: int


def runs(batch: MessageBatch | list[Message]) -> list[Run]:
    """A polled batch as runs.  A `MessageBatch` (``poll_view``) gives them as they are (no
    `Message` objects: the hot path); a list from ``poll_batch`` goes through `Message`."""
    if isinstance(batch, MessageBatch):
        return [Run(state.key, state.claim, decoded, start, end)
                for state, decoded, start, end in batch.runs()]
    out: list[Run] = []
    current: Decoded = []
    for m in batch:
        key = (m.topic, m.partition)
        if not out or out[-1].key != key or out[-1].claim != m.claim:
            current = []
            out.append(Run(key, m.claim, current, 0, 0))
        current.append((m.offset, m.next_offset, m.value))
    return [r._replace(end=len(r.decoded)) for r in out]


class EosLane:
    """One owned source partition of the exactly-once mirror (module docstring)."""

    __slots__ = ("already", "base", "buffer", "bytes", "claim", "cur_index", "cur_offset",
                 "failed", "filtering", "fixed", "n_target", "partition", "positions",
                 "producer", "resume", "source", "state", "status", "tail", "target_topic",
                 "topic")

    def __init__(self, state: PartitionState, target_topic: str, n_target: int) -> None:
        self.state = state
        self.topic: str = state.topic
        self.partition: str = state.name
        self.claim: int = state.claim
        self.status = LaneStatus(f"{self.topic}/{self.partition}")
        self.target_topic = target_topic
        self.n_target = n_target
        self.source = f"{self.topic}/{self.partition}".encode()
        self.producer: Producer | None = None
        self.fixed: int | None = None  # preserve: the one target partition
        self.resume: tuple[int, int] = (-1, 0)
        self.already: set[tuple[int, int]] = set()
        self.filtering = False
        self.positions: dict[int, int] = {}
        self.base: dict[int, int] = {}
        self.buffer: list[Pending] = []
        self.cur_offset = -1
        self.cur_index = 0
        self.bytes = 0
        self.tail: tuple[int, int, int] | None = None
        #: a produce the producer refused (its transaction is lost): buffer only, recover at
        #: the next commit
        self.failed: BaseException | None = None

    def track(self, err: object, msg: KafkaMessage) -> None:
        """Delivery report of a segment's first record: a lower bound of every later record
        of this lane in that target partition (where a future scan may start)."""
        offset = msg.offset()
        partition = msg.partition()
        if err is None and offset is not None and partition is not None \
                and offset > self.positions.get(partition, -1):
            self.positions[partition] = offset

    def already_visible(self, offset: int, index: int) -> bool:
        """Whether the message at ``(offset, index)`` is on the target already."""
        where = (offset, index)
        if where < self.resume:
            return True
        if where in self.already:
            self.already.discard(where)
            if not self.already and self.resume[1] == 0:
                self.filtering = False
            return True
        return False

    def checkpoint(self) -> Checkpoint:
        """The position the open transaction reaches (after its tail)."""
        if self.tail is None:
            raise ValueError("checkpoint of a lane with nothing handled")
        o, nxt, index = self.tail
        resume = (o, index + 1) if nxt == o else (nxt, 0)
        return Checkpoint(resume[0], resume[1], self.target_topic, dict(self.positions))

    def committed(self, cp: Checkpoint) -> Message:
        """The transaction holding everything up to the tail committed: reset it and return
        the message to acknowledge to the 0.7 group."""
        last = self.tail
        assert last is not None
        self.resume = (cp.offset, cp.skip)
        self.base = dict(cp.positions)
        self.buffer = []
        self.bytes = 0
        self.tail = None
        state = self.state
        return Message(state.topic, state.broker_id, state.partition_id, last[0], last[1],
                       b"", state)

    def close_producer(self) -> None:
        """Throw the producer away (its open transaction is aborted by the next owner's
        ``init_transactions``)."""
        producer, self.producer = self.producer, None
        if producer is None:
            return
        try:
            producer.purge()
            producer.flush(0)
        except Exception as exc:  # a broken producer must not block the others
            log.debug("closing producer of %s/%s: %r", self.topic, self.partition, exc)
