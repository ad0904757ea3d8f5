"""`Fetcher`: one thread per broker, MULTIFETCH of every owned partition on it.

The 0.7.2 ``FetcherRunnable`` loop, with its failure modes fixed (REFERENCE §2.5, §6.5):

* one MULTIFETCH per round for all of this broker's partitions, each at its own fetch
  offset and fetch size; each answer is decoded deep (`decode_message_set`) and queued as one
  chunk into `Delivery` -- a full queue blocks here (backpressure) -- which advances the
  partition's fetch offset by ``valid_bytes`` (shallow bytes);
* a round in which no partition returned data sleeps ``fetcher.backoff.ms`` (interruptibly);
* error 1 (OffsetOutOfRange): ``autooffset.reset`` through an offsets request to the same
  broker, and the new offset is written to ZooKeeper at once, as the reference does;
* a partition whose fetch offset is unknown (no committed offset when claimed) is resolved
  the same way but *not* written to ZooKeeper (reference: ``addPartitionTopicInfo``);
* an answer with bytes but no whole message (one message larger than the fetch size)
  doubles that partition's fetch size up to ``max.fetch.size``; beyond it the partition is
  parked and `MessageTooLargeError` (topic, partition, offset) is queued for the application.
  The other partitions keep being fetched -- Scala's fetcher thread died instead;
* corrupt data (CRC, magic, size) parks just that partition the same way, *at the corrupt
  message*: the whole messages in front of it in the same answer are queued first
  (`decode_batch_valid_prefix`), and the error's offset is the corrupt message's;
* a start offset (the committed offset read at the claim) at which the first fetch finds no
  whole message is checked against the broker (`zkconsumer.client.alignment`): if it lies
  inside a message the partition is parked with `MisalignedOffsetError` naming topic,
  partition, offset, the boundaries around it and the ``offsets reset`` fix -- instead of
  growing the fetch to ``max.fetch.size`` and blaming the message size;
* connection errors back off and reconnect: a dead broker's partitions vanish from
  ``/brokers/topics/T`` and the rebalance moves them, or the broker comes back.

Invariant: the fetcher never writes state directly -- offsets move only through `Delivery`
calls that check its `FetchHandle` and the partition's ``active`` flag under one lock, so a
fetcher that was stopped (rebalance) cannot queue or commit anything any more, even if it is
still blocked in a socket call when it is stopped.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Callable, Sequence

from zkconsumer.client.alignment import check_alignment, misaligned_error
from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.consumer.delivery import Delivery, FetchHandle
from zkconsumer.consumer.message import PartitionState
from zkconsumer.errors import (
    BrokerConnectionError,
    BrokerError,
    DecodeError,
    MessageTooLargeError,
    MisalignedOffsetError,
    ZkConsumerError,
)
from zkconsumer.protocol import (
    EARLIEST_TIME,
    LATEST_TIME,
    ErrorCode,
    FetchRequest,
)
from zkconsumer.protocol.batch import MessageBatch as ColumnBatch
from zkconsumer.protocol.batch import decode_batch_valid_prefix
from zkconsumer.protocol.prefix import decode_valid_prefix
from zkconsumer.zk.paths import BrokerInfo

__all__ = ["Fetcher"]

log = logging.getLogger(__name__)

_LEN = struct.Struct(">i")

#: ``on_reset(state, offset)``: persist an out-of-range reset (the coordinator writes ZK).
ResetCallback = Callable[[PartitionState, int], None]
ParkCallback = Callable[[PartitionState, BaseException], None]


class Fetcher:
    """Fetches the given partitions of one broker until stopped."""

    def __init__(self, broker: BrokerInfo, states: Sequence[PartitionState], delivery: Delivery,
                 *, reset_policy: str, fetch_size: int, max_fetch_size: int,
                 backoff_s: float, socket_timeout_s: float, buffer_size: int,
                 on_reset: ResetCallback, name: str, group: str | None = None,
                 on_park: ParkCallback | None = None) -> None:
        self.broker = broker
        self.states = list(states)
        self.handle = FetchHandle()
        self._delivery = delivery
        self._reset_time = EARLIEST_TIME if reset_policy == "smallest" else LATEST_TIME
        self._reset_policy = reset_policy
        self._fetch_size = fetch_size
        self._max_fetch_size = max_fetch_size
        self._backoff_s = backoff_s
        self._socket_timeout_s = socket_timeout_s
        self._buffer_size = buffer_size
        self._on_reset = on_reset
        self._on_park = on_park  # told when a partition stops being fetched for good
        self._group = group  # named in the fix of a misaligned offset
        self._wake = threading.Event()
        #: partitions whose fetch offset is not yet known to be a message boundary
        self._unchecked = {s.key for s in self.states}
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop; does not wait (the handle already invalidates its work)."""
        self._delivery.stop([self.handle])
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # ---------------------------------------------------------------------------------------

    def _sleep(self, seconds: float) -> None:
        self._wake.wait(seconds)

    def _run(self) -> None:
        consumer = SimpleConsumer(self.broker.host, self.broker.port,
                                  socket_timeout=self._socket_timeout_s,
                                  buffer_size=self._buffer_size, fetch_size=self._fetch_size,
                                  max_fetch_size=self._max_fetch_size)
        try:
            while not self.handle.stopped:
                try:
                    got_data = self._round(consumer)
                except BrokerConnectionError as exc:
                    log.info("fetcher for broker %s (%s): %s; retrying in %.1fs",
                             self.broker.id, self.broker.address, exc, self._backoff_s)
                    consumer.close()
                    self._sleep(self._backoff_s)
                    continue
                except BrokerError as exc:  # a whole-request error (never sent by 0.7.2)
                    log.warning("fetcher for broker %s: %s", self.broker.id, exc)
                    self._sleep(self._backoff_s)
                    continue
                if not got_data and not self.handle.stopped:
                    self._sleep(self._backoff_s)
        except Exception:  # a bug must not silently stop consumption: log it loudly
            log.exception("fetcher for broker %s crashed", self.broker.id)
        finally:
            consumer.close()

    def _round(self, consumer: SimpleConsumer) -> bool:
        """One multifetch round; True if any partition returned data."""
        for state in self.states:
            if state.fetch_offset is None and state.active and state.error is None:
                self._resolve_initial(consumer, state)
        todo = [s for s in self.states
                if s.active and s.error is None and s.fetch_offset is not None]
        if not todo:
            return False
        requests = [FetchRequest(s.topic, s.partition_id, s.fetch_offset or 0, s.fetch_size)
                    for s in todo]
        answers = consumer.multifetch(requests)
        got_data = False
        for state, request, answer in zip(todo, requests, answers, strict=False):
            if self.handle.stopped:
                return got_data
            if answer.error:
                self._on_error(consumer, state, request, answer.error)
                continue
            data = answer.messages
            if not data:
                state.log_end = request.offset  # an empty answer: we are at the end
                continue
            # in the form the application polls: columns (`poll_columns`, no Python object
            # per message) or tuples (the per-message APIs)
            decode = (decode_batch_valid_prefix if self._delivery.wants_columns
                      else decode_valid_prefix)
            decoded, error = decode(data, request.offset)
            if decoded.valid_bytes == 0:
                if state.key in self._unchecked:
                    self._unchecked.discard(state.key)
                    misaligned = self._misaligned(consumer, state, request.offset, error)
                    if misaligned is not None:
                        self._park(state, misaligned)
                        continue
                if error is not None:
                    self._park(state, error)
                    continue
                self._grow(state, request.offset, data)
                got_data = True  # retry at once with the bigger size
                continue
            self._unchecked.discard(state.key)
            state.fetch_size = self._fetch_size
            end = request.offset + decoded.valid_bytes
            if state.log_end is not None and end > state.log_end:
                state.log_end = end
            accepted = self._delivery.put(self.handle, state, request.offset, end,
                                          decoded if isinstance(decoded, ColumnBatch)
                                          else decoded.messages)
            if not accepted and self.handle.stopped:
                return got_data
            if error is not None and accepted:
                # the valid prefix is queued; park at the corrupt message (error.offset)
                self._park(state, error)
            got_data = True
        return got_data

    def _misaligned(self, consumer: SimpleConsumer, state: PartitionState, offset: int,
                    error: DecodeError | None) -> MisalignedOffsetError | None:
        """The first fetch at a start offset found no whole message: is it inside one?

        Only start offsets (the committed offset read at the claim) can be misaligned:
        later fetch offsets are reached by walking whole messages, and reset offsets come
        from the broker.  Undecided or unreachable: None, the caller goes on as before.
        """
        try:
            verdict = check_alignment(consumer, state.topic, state.partition_id, offset)
        except (BrokerError, BrokerConnectionError) as exc:
            log.info("%s/%s: could not check whether offset %s is a message boundary: %s",
                     state.topic, state.name, offset, exc)
            return None
        if verdict.aligned is not False:
            return None
        found = misaligned_error(state.topic, state.name, offset, verdict, group=self._group)
        found.__cause__ = error
        return found

    def _resolve_initial(self, consumer: SimpleConsumer, state: PartitionState) -> None:
        """No committed offset: ``autooffset.reset`` (not written to ZooKeeper, as Scala)."""
        offset = self._ask_reset_offset(consumer, state)
        self._unchecked.discard(state.key)  # the broker's offsets are boundaries
        log.info("%s/%s has no committed offset; starting at %s (%s)", state.topic,
                 state.name, offset, self._reset_policy)
        self._delivery.reset(self.handle, state, offset)

    def _ask_reset_offset(self, consumer: SimpleConsumer, state: PartitionState) -> int:
        offsets = consumer.offsets(state.topic, state.partition_id, self._reset_time, 1)
        return offsets[0] if offsets else 0

    def _on_error(self, consumer: SimpleConsumer, state: PartitionState, request: FetchRequest,
                  code: int) -> None:
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            offset = self._ask_reset_offset(consumer, state)
            log.warning("offset %s of %s/%s is out of range; resetting to %s (%s)",
                        request.offset, state.topic, state.name, offset, self._reset_policy)
            self._unchecked.discard(state.key)
            if self._delivery.reset(self.handle, state, offset):
                try:
                    self._on_reset(state, offset)
                except ZkConsumerError as exc:
                    log.warning("could not write reset offset of %s/%s: %s", state.topic,
                                state.name, exc)
            return
        error = BrokerError.for_code(code, topic=state.topic, partition=state.partition_id,
                                     offset=request.offset)
        if code == ErrorCode.WRONG_PARTITION:
            # The broker does not have it (yet/any more): ZooKeeper will catch up and the
            # rebalance will move it; keep retrying quietly meanwhile.
            log.info("broker %s: %s", self.broker.id, error)
            return
        self._park(state, error)

    def _grow(self, state: PartitionState, offset: int, data: bytes) -> None:
        declared = _LEN.unpack_from(data)[0] + 4 if len(data) >= 4 else None
        if state.fetch_size >= self._max_fetch_size or (
                declared is not None and declared > self._max_fetch_size):
            self._park(state, MessageTooLargeError(
                f"message at {state.topic}/{state.name} offset {offset} "
                f"({declared if declared is not None else 'unknown'} bytes) is larger than "
                f"max.fetch.size={self._max_fetch_size}; the partition is paused until the "
                f"next rebalance", topic=state.topic, partition=state.name, offset=offset,
                size=declared))
            return
        grown = max(state.fetch_size * 2, declared or 0)
        state.fetch_size = min(grown, self._max_fetch_size)
        log.info("message at %s/%s offset %s exceeds fetch size; fetching with %s bytes",
                 state.topic, state.name, offset, state.fetch_size)

    def _park(self, state: PartitionState, error: BaseException) -> None:
        log.error("stopped fetching %s/%s: %s", state.topic, state.name, error)
        if self._delivery.put_error(self.handle, state, error) and self._on_park is not None:
            self._on_park(state, error)
