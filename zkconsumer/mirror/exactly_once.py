"""The exactly-once mirror: 0.7 source partitions into ``kafka://`` targets in transactions.

The design of Kafka Connect's exactly-once sources, with the 0.7 group as the source:

* **One transactional producer per owned source partition** (a *lane*), ``transactional.id``
  = ``zkconsumer-mirror.<group>.<topic>.<B-P>``.  The id follows the *partition*, not the
  process: whoever claims the partition next -- the same process after a restart, another
  member after a rebalance -- calls ``init_transactions`` with the same id, which aborts the
  previous owner's open transaction and fences it (a zombie that lost its ZooKeeper session
  but still runs can no longer commit).  ZooKeeper ownership decides who may claim; the
  transactional id makes the target enforce it.
* **A transaction carries its own source position.**  Every ``mirror.transaction.interval.ms``
  (or ``mirror.transaction.max.messages``) each lane appends a checkpoint record
  (`zkconsumer.mirror.checkpoints`) to the target's checkpoint topic and commits.  Data and
  position become visible together or not at all.
* **Claim = fence, then read the checkpoint** (read_committed), reset the 0.7 fetch position to
  it (before the fetchers start: ``on_assigned`` runs first) and drop the messages of a
  compressed set the checkpoint says were already mirrored.  Then scan the target from the
  checkpoint's positions for records of this partition the checkpoint does not cover (only a
  broker that does not filter aborted transactions shows any; see checkpoints.py) and do not
  write those again.
* **ZooKeeper is committed too, after the transaction** (the transaction's last message is
  acknowledged to the group), so lag, ``group describe`` and Scala tooling keep working; it
  trails the checkpoint and is never the resume point while a checkpoint exists (unless it
  is ahead, e.g. after an at-least-once run: then it wins, with a WARNING).
* **Failures.**  A commit that fails (target down, timeouts, an abortable error) makes the
  lane rebuild its producer (``init_transactions`` aborts the open transaction), rescan, and
  resend the messages of the failed transaction from memory -- with backoff, forever, as the
  at-least-once engine does.  Being *fenced* means another process owns the partition now:
  that is fatal for this process (exit 1 after committing what is safe).
* **Rebalance.**  ``on_revoked`` commits the revoked lanes' open transactions (their data is
  complete up to the last message produced) and closes their producers before the group
  releases the partitions.  Messages of a claim that is no longer current (handed out before
  a rebalance, processed after it) are dropped *and never acknowledged*: the next claim
  resumes from the checkpoint, so nothing is skipped (issue 11's Defect 1 cannot happen here).
* **No loops.**  0.7 messages a bridge wrote (`zkconsumer.mirror.loopguard`) are handled like
  already visible ones: acknowledged, not written.

Lanes (`eos_lane.EosLane`) follow `zkconsumer.mirror.lanes`: CLAIMING (`eos_claim`) -> ACTIVE
<-> FAILED (a transaction failed; recovered with the shared runtime's backoff) -> RELEASED, or
FENCED.  Stop, retry, backoff and fatal errors are the shared `zkconsumer.mirror.runtime`'s.

Invariants: a message is acknowledged to the 0.7 group only after the transaction holding it
committed; every record carries provenance headers (`eos_lane.headers`); lanes are touched
only under ``self._lock``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.message import Decoded, MessageBatch
from zkconsumer.errors import MirrorError, TargetError, ZkConsumerError
from zkconsumer.mirror.checkpoints import (
    HEADER_INDEX,
    HEADER_OFFSET,
    HEADER_SOURCE,
    checkpoint_key,
    scan_beyond,
)
from zkconsumer.mirror.config import MirrorConfig
from zkconsumer.mirror.engine import poll_parked, target_partitions
from zkconsumer.mirror.eos_claim import EosClaimer
from zkconsumer.mirror.eos_lane import (
    EosLane,
    Headers,
    Pending,
    headers,
    runs,
    send_record,
    transactional_id,
)
from zkconsumer.mirror.lanes import LaneState
from zkconsumer.mirror.loopguard import LoopGuard, inside
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.routing import Router, murmur2_partition
from zkconsumer.mirror.runtime import (
    Every,
    Runtime,
    SourceGroupEngine,
    SourceView,
    Stopped,
    close_all,
)
from zkconsumer.mirror.targets import KafkaAdmin, producer_config

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka import Message as KafkaMessage

    Delivery = Callable[[KafkaError | None, KafkaMessage], None]

__all__ = ["ExactlyOnceMirror", "transactional_id"]

log = logging.getLogger(__name__)

_FENCED = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH",
                     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})


class ExactlyOnceMirror(SourceGroupEngine):
    """A mirror process writing ``kafka://`` targets in transactions (module docstring)."""

    def __init__(self, config: MirrorConfig, consumer: GroupConsumer, *,
                 source_partitions: Callable[[str], Sequence[str]],
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 closers: Sequence[Callable[[], None]] = (),
                 client_id: str = "zkconsumer-mirror",
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.consumer = consumer
        self.stats = MirrorStats()
        self.group: str = consumer.config.group_id
        self.bootstrap = ",".join(config.target.bootstrap)
        self.description = str(config.target)
        self.runtime = Runtime(config, self.stats, self.description, clock=clock)
        self.progress = progress
        self.view: SourceView | None = None  # set by runner.build_mirror (lag, loops)
        self._options = dict(config.target_options)
        self._client_id = client_id
        self._closers = list(closers)
        self._lock = threading.RLock()
        self._lanes: dict[tuple[str, str], EosLane] = {}
        self._guard: LoopGuard | None = None
        self._started = False
        self._created: set[str] = set()
        self._admin = KafkaAdmin(config.target.bootstrap, self._options,
                                 client_id=client_id + "-admin")
        self._router = Router(
            partitioning=config.partitioning, topic_map=config.topic_map,
            target_partitions=self._target_partitions, source_partitions=source_partitions,
            hash_partition=murmur2_partition, key_regex=config.key_pattern())
        self._claimer = EosClaimer(config, self.runtime, self.group, self.bootstrap, consumer,
                                   self._router, self._new_producer)
        self._listen(consumer)

    # -- control (stop, run: `RuntimeEngine`) --------------------------------------------------

    @property
    def lanes(self) -> dict[tuple[str, str], EosLane]:
        return self._lanes

    def _start(self) -> None:
        self._ensure_checkpoint_topic()
        if self.view is not None:
            self._guard = LoopGuard(self.view, wait=self.runtime.wait,
                                    read=self.runtime.zookeeper_read,
                                    wait_limit=self.config.flush_wait_ms / 1000.0)
        self._join_source()
        self._started = True

    def _listen(self, consumer: GroupConsumer) -> None:
        consumer.add_listener(self)
        self._claimer.consumer = consumer

    # -- target helpers -----------------------------------------------------------------------

    def _ensure_checkpoint_topic(self) -> None:
        topic = self.config.checkpoint_topic

        def ensure() -> None:
            try:
                self._admin.partition_count(topic)
            except TargetError:
                self._admin.create_topic(topic, 1, self.config.replication_factor,
                                         {"cleanup.policy": "compact"})

        self.runtime.retrying("checking the checkpoint topic", ensure)

    def _target_partitions(self, topic: str) -> int:
        return target_partitions(self._admin, topic, self.config, self._created)

    def _new_producer(self, lane: EosLane) -> Producer:
        from confluent_kafka import Producer

        conf = producer_config(
            self.config.target.bootstrap, self._options, client_id=self._client_id,
            transactional_id=transactional_id(self.group, lane.topic, lane.partition))
        producer = Producer(conf)
        try:
            # bounded, so a stop is seen; a timed-out attempt is retried by the caller (the
            # broker may still be aborting the previous owner's transaction)
            producer.init_transactions(min(10.0, self.config.transaction_timeout_ms / 1000.0))
        except Exception:
            producer.purge()
            producer.flush(0)
            raise
        return producer

    # -- claims and revocations (coordinator thread) --------------------------------------------

    def on_assigned(self, partitions: dict[str, list[str]]) -> None:
        try:
            self._assign(partitions)
        except Stopped:
            pass  # stopping: the lanes were not installed, nothing of theirs is acked
        except Exception as exc:  # the consumer swallows listener errors: make them fatal
            if not self.runtime.stopping:
                self.runtime.fail(exc)

    def _assign(self, partitions: dict[str, list[str]]) -> None:
        # The consumer's own state of each claimed partition: its claim number tells stale
        # messages apart, and seek moves the fetch position before the fetchers start.
        states = self.consumer.claimed()
        lanes = []
        for topic, names in partitions.items():
            for name in names:
                state = states.get((topic, name))
                if state is None:
                    continue
                target = self._router.target_topic(topic)
                n = self.runtime.retrying(f"describing target topic {target}",
                                          partial(self._router.target_count, target))
                lanes.append(EosLane(state, target, n))
        if not lanes:
            return
        self._claimer.claim(lanes)
        with self._lock:
            for lane in lanes:
                self._lanes[(lane.topic, lane.partition)] = lane
        log.info("mirror assigned %s (exactly-once: resuming from the target's checkpoints)",
                 partitions)

    def on_revoked(self, partitions: dict[str, list[str]]) -> None:
        with self._lock:
            for topic, names in partitions.items():
                for name in names:
                    lane = self._lanes.pop((topic, name), None)
                    if lane is not None:
                        self._release(lane, "revoked")

    def _commit_last(self, lane: EosLane) -> None:
        """Commit what the lane handled, once, without retrying (a release or a stop)."""
        if lane.tail is None or self.runtime.fatal is not None:
            return
        try:
            self._commit_lane(lane, retry=False)
        except Exception as exc:
            log.warning("%s/%s: last transaction not committed (%r); whoever owns the "
                        "partition next resumes from the target's checkpoint", lane.topic,
                        lane.partition, exc)

    def _release(self, lane: EosLane, why: str) -> None:
        """Commit what the lane handled (the next owner resumes after it), close, release."""
        self._commit_last(lane)
        lane.close_producer()
        if lane.status.live:
            lane.status.move(LaneState.RELEASED, why)

    def on_state(self, state: str) -> None:
        log.debug("source consumer state %s", state)

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        cfg = self.config
        clock = self.runtime.clock
        txn = Every(cfg.transaction_interval_ms / 1000.0, clock)
        commit = Every(cfg.commit_interval_ms / 1000.0, clock)
        progress = Every(cfg.progress_interval_ms / 1000.0, clock)
        pending = 0
        while not self.runtime.stopping:
            self.runtime.check()
            batch = poll_parked(self.consumer.poll_view, cfg.poll_batch, 0.05,
                                MessageBatch([]), self.stats)
            if batch:
                with self._lock:
                    pending += self._produce(batch)
            now = clock()
            if txn.due(now) or pending >= cfg.transaction_max_messages:
                with self._lock:
                    self._commit_all()
                pending = 0
            if commit.due(now):
                self._zk_commit()
            if self.progress is not None and progress.due(now):
                self.progress(self.stats.snapshot())

    def _produce(self, batch: MessageBatch) -> int:
        count = 0
        lanes = self._lanes
        guard = self._guard
        if guard is not None:
            guard.new_poll()
        for run in runs(batch):
            lane = lanes.get(run.key)
            if lane is None or lane.claim != run.claim:
                continue  # a revoked claim: never acked, the next claim resumes from the target
            bridged = [] if guard is None else guard.ranges(
                lane.topic, lane.partition, run.decoded[run.end - 1][0])
            count += self._produce_segment(lane, run.decoded, run.start, run.end, bridged)
        self.stats.add("sent", count)
        self.stats.in_flight = sum(len(lane.buffer) for lane in lanes.values())
        return count

    def _produce_segment(self, lane: EosLane, decoded: Decoded, start: int, end: int,
                         bridged: list[tuple[int, int]]) -> int:
        """Produce ``decoded[start:end]`` into the lane's open transaction (the hot path: no
        call per message but librdkafka's ``produce``)."""
        from confluent_kafka import KafkaException

        producer = lane.producer
        assert producer is not None
        produce = producer.produce
        topic = lane.target_topic
        source = lane.source
        fixed = lane.fixed
        route = self._router.route
        buffer = lane.buffer
        append = buffer.append
        checking = lane.filtering or bool(bridged)
        offset, index = lane.cur_offset, lane.cur_index
        n = size = looped = 0
        partition, key = (-1, None) if fixed is None else (fixed, None)
        track: Delivery | None = lane.track
        pending = tuple.__new__  # a Pending without NamedTuple's Python-level __new__ (hot)
        for i in range(start, end):
            o, nxt, value = decoded[i]
            if o == offset:
                index += 1
            else:
                offset, index = o, 0
            if checking:
                if bridged and inside(bridged, o):
                    lane.tail = (o, nxt, index)  # a bridge wrote it: acknowledged, not copied
                    looped += 1
                    continue
                if lane.filtering and lane.already_visible(o, index):
                    lane.tail = (o, nxt, index)
                    checking = lane.filtering or bool(bridged)
                    continue
            if fixed is None:
                r = route(lane.topic, lane.partition, value)
                partition = -1 if r.partition is None else r.partition
                key = r.key
            append(pending(Pending, (o, nxt, index, value, partition, key)))
            hdrs: Headers = [(HEADER_SOURCE, source), (HEADER_OFFSET, b"%d" % o),  # = headers(),
                             (HEADER_INDEX, b"0" if index == 0 else b"%d" % index)]  # inlined
            if lane.failed is not None:
                pass  # buffered: the recovery at the next commit resends it
            elif track is not None:  # the segment's first record reports where it landed
                try:
                    send_record(producer, topic, value, partition, key, hdrs, track)
                except KafkaException as exc:
                    lane.failed = self._refused(exc, topic, value)
                track = None
            else:
                try:
                    produce(topic, value, key, partition, headers=hdrs)
                except BufferError:
                    send_record(producer, topic, value, partition, key, hdrs)
                except KafkaException as exc:
                    lane.failed = self._refused(exc, topic, value)
            n += 1
            size += len(value)
        lane.cur_offset, lane.cur_index = offset, index
        if looped:
            self.stats.add("looped", looped)
        if n:
            last = buffer[-1]
            lane.tail = (last.offset, last.next_offset, last.set_index)
            lane.bytes += size
            producer.poll(0)  # serve delivery reports (only segments' first records have one)
        return n

    def _refused(self, exc: KafkaException, topic: str, value: bytes) -> BaseException:
        """A produce librdkafka refused: transient (returned, the lane recovers at the next
        commit), or a message it will never take (fatal: raised; the open transactions are
        then never committed, so nothing past it is acknowledged)."""
        from confluent_kafka import KafkaError

        if exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
            raise self.runtime.fail(TargetError(
                f"target client refuses a {len(value)}-byte message for {topic}: "
                f"{exc.args[0].str()} (raise target.message.max.bytes)")) from exc
        return exc  # type: ignore[no-any-return]

    # -- transactions -------------------------------------------------------------------------

    def _commit_all(self) -> None:
        for lane in list(self._lanes.values()):
            if lane.tail is not None:
                self._commit_lane(lane, retry=True)
        self.stats.in_flight = 0

    def _commit_lane(self, lane: EosLane, *, retry: bool) -> None:
        """Append the checkpoint, commit; on failure rebuild, rescan, resend, commit again."""
        from confluent_kafka import KafkaException

        cp = lane.checkpoint()
        key = checkpoint_key(self.group, lane.topic, lane.partition)
        timeout = self.config.transaction_timeout_ms / 1000.0
        if lane.failed is not None:
            failed, lane.failed = lane.failed, None
            if not retry:
                raise failed
            self._recover(lane, failed)
        while True:
            try:
                producer = lane.producer
                if producer is None:
                    raise MirrorError("no producer")
                producer.produce(self.config.checkpoint_topic, cp.encode(), key, 0)
                producer.poll(0)
                producer.commit_transaction(timeout)
                break
            except KafkaException as exc:
                err = exc.args[0]
                if err.name() in _FENCED or (err.fatal() and "fenced" in err.str().lower()):
                    lane.status.move(LaneState.FENCED, err.str())
                    raise self.runtime.fail(MirrorError(
                        f"{lane.topic}/{lane.partition}: fenced on the target -- another "
                        f"mirror process claimed this partition ({err.str()})")) from exc
                if not retry:
                    raise
                self._recover(lane, exc)
            except (MirrorError, BufferError) as exc:
                if not retry or self.runtime.fatal is not None:
                    raise
                self._recover(lane, exc)
        # committed: the data and the checkpoint are visible together
        count, size = len(lane.buffer), lane.bytes
        if cp.offset > lane.resume[0] >= 0:
            self.stats.add("log_bytes", cp.offset - lane.resume[0])
        elif lane.buffer:  # the first transaction of a first run: from its first message
            self.stats.add("log_bytes", max(0, cp.offset - lane.buffer[0].offset))
        ack = lane.committed(cp)
        self.stats.add("transactions")
        self.stats.mirrored(lane.topic, count, size)
        self.runtime.succeeded()
        lane.status.move(LaneState.ACTIVE, "committed")
        self.consumer.ack(ack)
        assert lane.producer is not None
        lane.producer.begin_transaction()

    def _recover(self, lane: EosLane, exc: BaseException) -> None:
        """Rebuild the lane's producer (aborting the failed transaction), rescan, resend."""
        self.stats.add("target_errors")
        lane.status.move(LaneState.FAILED, repr(exc))
        self.runtime.backoff_wait(
            f"{lane.topic}/{lane.partition}: a transaction of {len(lane.buffer)} messages",
            exc)
        lane.close_producer()
        self._ensure_checkpoint_topic()
        lane.producer = self.runtime.retrying(
            f"initialising transactions for {lane.topic}/{lane.partition}",
            partial(self._new_producer, lane))
        lane.positions = dict(lane.base)
        visible = self.runtime.retrying("scanning the target", partial(
            scan_beyond, self.bootstrap, lane.target_topic, lane.base, lane.source,
            lane.resume))
        lane.producer.begin_transaction()
        resend = [e for e in lane.buffer if (e.offset, e.set_index) not in visible]
        if visible:
            log.warning("%s/%s: %d records of the failed transaction are visible on the "
                        "target anyway (aborted transactions not filtered); not resending them",
                        lane.topic, lane.partition, len(lane.buffer) - len(resend))
        for e in resend:
            send_record(lane.producer, lane.target_topic, e.value, e.partition, e.key,
                  headers(lane.source, e.offset, e.set_index))
        self.stats.add("sent", len(resend))

    def _zk_commit(self) -> None:
        try:
            self.consumer.commit()
            self.stats.add("commits")
        except ZkConsumerError as exc:
            log.warning("offset commit failed (will retry): %s", exc)

    # -- shutdown -----------------------------------------------------------------------------

    def _shutdown(self) -> None:
        try:
            if self._started and self.runtime.fatal is None:
                with self._lock:
                    for lane in list(self._lanes.values()):
                        self._commit_last(lane)
                self._zk_commit()
        finally:
            try:
                self.consumer.close()  # revokes every lane (on_revoked closes producers)
            finally:
                with self._lock:
                    for lane in self._lanes.values():
                        lane.close_producer()
                        if lane.status.live:
                            lane.status.move(LaneState.RELEASED, "shutdown")
                    self._lanes.clear()
                close_all(self._closers)

