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

Invariants: a message is acknowledged to the 0.7 group only after the transaction holding it
committed; every record carries provenance headers (`HEADER_SOURCE`/`_OFFSET`/`_INDEX`);
lanes are touched only under ``self._lock``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from zkconsumer.consumer.message import Message, MessageBatch
from zkconsumer.errors import MirrorError, TargetError, ZkConsumerError
from zkconsumer.mirror.checkpoints import (
    HEADER_INDEX,
    HEADER_OFFSET,
    HEADER_SOURCE,
    Checkpoint,
    checkpoint_key,
    read_checkpoints,
    scan_beyond,
)
from zkconsumer.mirror.config import MirrorConfig, Partitioning
from zkconsumer.mirror.engine import poll_parked, target_partitions
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.routing import Router
from zkconsumer.mirror.runtime import SourceView
from zkconsumer.mirror.targets import KafkaAdmin, producer_config

__all__ = ["ExactlyOnceMirror", "transactional_id"]

log = logging.getLogger(__name__)

_FENCED = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH",
                     "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})


class _Stopped(MirrorError):
    """`stop` was called while waiting for the target: a clean stop, not an error."""


def transactional_id(group: str, topic: str, partition: str) -> str:
    """The id that follows a source partition from owner to owner (module docstring)."""
    return f"zkconsumer-mirror.{group}.{topic}.{partition}"


def _runs(batch: Any) -> list[tuple[tuple[str, str], int, Any, int, int]]:
    """A polled batch as runs of one partition's messages: ``(key, claim, decoded, start,
    end)`` with ``decoded[i] = (offset, next_offset, value)``.

    A `MessageBatch` (``poll_view``) gives them as they are (`MessageBatch.runs`: no
    `Message` objects are built, the hot path); anything else -- a list from ``poll_batch``
    -- goes through the `Message` API.
    """
    if isinstance(batch, MessageBatch):
        return [(state.key, state.claim, decoded, start, end)
                for state, decoded, start, end in batch.runs()]
    runs: list[tuple[tuple[str, str], int, Any, int, int]] = []
    current: list[tuple[int, int, bytes]] = []
    for m in batch:
        key = (m.topic, m.partition)
        if not runs or runs[-1][0] != key or runs[-1][1] != m.claim:
            current = []
            runs.append((key, m.claim, current, 0, 0))
        current.append((m.offset, m.next_offset, m.value))
    return [(key, claim, decoded, 0, len(decoded)) for key, claim, decoded, _s, _e in runs]


class _Lane:
    """One owned source partition: its transactional producer and open transaction."""

    def __init__(self, state: Any, target_topic: str, n_target: int) -> None:
        self.state = state
        self.topic: str = state.topic
        self.partition: str = state.name
        self.claim: int = state.claim
        self.target_topic = target_topic
        self.n_target = n_target
        self.source = f"{self.topic}/{self.partition}".encode()
        self.producer: Any = None
        self.fixed: int | None = None  # preserve: the one target partition
        self.resume: tuple[int, int] = (-1, 0)  # committed position: (0.7 offset, skip)
        self.already: set[tuple[int, int]] = set()  # visible past `resume`: never resend
        self.filtering = False
        self.positions: dict[int, int] = {}  # live: moved by delivery reports
        self.base: dict[int, int] = {}  # as in the last committed checkpoint
        #: messages of the open transaction, for a resend: (offset, next, index, value,
        #: target partition or -1 = by key, key)
        self.buffer: list[tuple[int, int, int, bytes, int, bytes | None]] = []
        self.cur_offset = -1
        self.cur_index = 0
        self.bytes = 0
        #: (offset, next_offset, index) of the last message handled, produced *or* skipped as
        #: already visible: the transaction's checkpoint and ack cover both.
        self.tail: tuple[int, int, int] | None = None
        #: a produce the producer refused (its transaction is lost): buffer only, recover at
        #: the next commit
        self.failed: BaseException | None = None

    def track(self, err: Any, msg: Any) -> None:
        """Delivery report of a segment's first record: a lower bound of every later record
        of this lane in that target partition (where a future scan may start)."""
        if err is None and msg.offset() is not None and msg.offset() >= 0:
            p, o = msg.partition(), msg.offset()
            if o > self.positions.get(p, -1):
                self.positions[p] = o


class ExactlyOnceMirror:
    """A mirror process writing ``kafka://`` targets in transactions (module docstring)."""

    def __init__(self, config: MirrorConfig, consumer: Any, *,
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
        self._options = dict(config.target_options)
        self._client_id = client_id
        self.progress = progress
        self.view: SourceView | None = None  # set by runner.build_mirror (lag, preserve)
        self._closers = list(closers)
        self._clock = clock
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._lanes: dict[tuple[str, str], _Lane] = {}
        self._fatal: BaseException | None = None
        self._started = False
        self._failures = 0
        self._created: set[str] = set()
        self._admin = KafkaAdmin(config.target.bootstrap, self._options,
                                 client_id=client_id + "-admin")
        self._router = Router(
            partitioning=config.partitioning, topic_map=config.topic_map,
            target_partitions=self._target_partitions, source_partitions=source_partitions,
            hash_partition=self._hash, key_regex=config.key_pattern())
        consumer.add_listener(self)

    # -- control ------------------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        try:
            self._ensure_checkpoint_topic()
            if not self._stop.is_set():
                self.consumer.start()
                self._started = True
                self._loop()
        except _Stopped:
            pass  # stop() during a target failure: what is committed is safe
        finally:
            self._shutdown()

    # -- target helpers -----------------------------------------------------------------------

    @staticmethod
    def _hash(data: bytes, n: int) -> int:
        from zkconsumer.mirror.routing import murmur2_partition

        return murmur2_partition(data, n)

    def _retrying(self, what: str, fn: Callable[[], Any]) -> Any:
        """``fn()`` until it succeeds, backing off; `TargetError`/config errors are final."""
        while True:
            try:
                result = fn()
                self._failures = 0
                return result
            except ZkConsumerError:
                raise
            except Exception as exc:
                if self._stop.is_set():
                    raise _Stopped(f"stopped while {what}") from exc
                self._failures += 1
                self.stats.healthy = False
                self.stats.add("retries")
                delay = self._backoff()
                log.warning("%s on %s failed (%r); retrying in %.1fs", what, self.description,
                            exc, delay)
                self._stop.wait(delay)

    def _backoff(self) -> float:
        cfg = self.config
        n = max(1, self._failures)
        return min(cfg.retry_backoff_max_ms, cfg.retry_backoff_ms * (1 << min(n - 1, 20))) / 1000.0

    def _ensure_checkpoint_topic(self) -> None:
        topic = self.config.checkpoint_topic

        def ensure() -> None:
            try:
                self._admin.partition_count(topic)
            except TargetError:
                self._admin.create_topic(topic, 1, self.config.replication_factor,
                                         {"cleanup.policy": "compact"})

        self._retrying("checking the checkpoint topic", ensure)

    def _target_partitions(self, topic: str) -> int:
        return target_partitions(self._admin, topic, self.config, self._created)

    def _new_producer(self, lane: _Lane) -> Any:
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

    def _close_producer(self, lane: _Lane) -> None:
        producer, lane.producer = lane.producer, None
        if producer is None:
            return
        try:
            producer.purge()
            producer.flush(0)
        except Exception as exc:  # a broken producer must not block the others
            log.debug("closing producer of %s/%s: %r", lane.topic, lane.partition, exc)

    # -- claims (coordinator thread, before the fetchers start) ---------------------------------

    def on_assigned(self, partitions: dict[str, list[str]]) -> None:
        try:
            self._assign(partitions)
        except Exception as exc:  # the consumer swallows listener errors: make them fatal
            if self._fatal is None and not self._stop.is_set():
                self._fatal = exc

    def _assign(self, partitions: dict[str, list[str]]) -> None:
        # The consumer's own state of each claimed partition: its claim number tells stale
        # messages apart, and reset_to moves the fetch position before the fetchers start.
        states = self.consumer.claimed()
        lanes = []
        for topic, names in partitions.items():
            for name in names:
                state = states.get((topic, name))
                if state is None:
                    continue
                target = self._router.target_topic(topic)
                n = self._retrying(f"describing target topic {target}",
                                   partial(self._router.target_count, target))
                lanes.append(_Lane(state, target, n))
        if not lanes:
            return
        try:
            self._claim(lanes)
        except _Stopped:
            return  # stopping: the lanes were not installed, nothing of theirs is acked
        with self._lock:
            for lane in lanes:
                self._lanes[(lane.topic, lane.partition)] = lane
        log.info("mirror assigned %s (exactly-once: resuming from the target's checkpoints)",
                 partitions)

    def _claim(self, lanes: list[_Lane]) -> None:
        for lane in lanes:  # fence first: the zombie's open transaction is aborted now
            lane.producer = self._retrying(
                f"initialising transactions for {lane.topic}/{lane.partition}",
                partial(self._new_producer, lane))
        keys = {checkpoint_key(self.group, lane.topic, lane.partition): lane for lane in lanes}
        found = self._retrying("reading checkpoints", lambda: read_checkpoints(
            self.bootstrap, self.config.checkpoint_topic, keys))
        # each lane's claim (checkpoint, scan of the target, fencing done above) waits on the
        # target for seconds; done one after the other they kept the group's other members
        # waiting past their rebalance retries, so the lanes are claimed side by side
        with ThreadPoolExecutor(max_workers=min(8, len(keys)),
                                thread_name_prefix="mirror-claim") as pool:
            for done in [pool.submit(self._claim_lane, key, lane, found)
                         for key, lane in keys.items()]:
                done.result()

    def _claim_lane(self, key: bytes, lane: _Lane, found: dict[bytes, Checkpoint]) -> None:
        """Resume one lane from its checkpoint in the target (see `_claim`)."""
        from confluent_kafka import TopicPartition

        if self.config.partitioning is Partitioning.PRESERVE:
            lane.fixed = self._router.route(lane.topic, lane.partition, b"").partition
        cp = found.get(key)
        zk = lane.state.fetch_offset
        if cp is not None and cp.offset >= 0 and zk is not None and zk > cp.offset:
            log.warning("%s/%s: ZooKeeper offset %d is ahead of the target's checkpoint %d "
                        "(an at-least-once run?); resuming from ZooKeeper",
                        lane.topic, lane.partition, zk, cp.offset)
            cp = Checkpoint(zk, 0, lane.target_topic, cp.positions)
        if cp is None:
            def watermarks(lane: _Lane = lane) -> dict[int, int]:
                from zkconsumer.mirror.reader import _consumer

                c = _consumer(self.bootstrap, "read_committed", None)
                try:
                    return {p: int(c.get_watermark_offsets(
                        TopicPartition(lane.target_topic, p), timeout=10)[1])
                        for p in range(lane.n_target)}
                finally:
                    c.close()

            positions = self._retrying("reading target watermarks", watermarks)
            cp = Checkpoint(-1 if zk is None else zk, 0, lane.target_topic, positions)
            self._write_marker(lane, key, cp)
        lane.resume = (cp.offset, cp.skip)
        lane.positions = dict(cp.positions)
        lane.base = dict(cp.positions)
        lane.already = self._retrying("scanning the target", partial(
            scan_beyond, self.bootstrap, lane.target_topic, lane.base, lane.source,
            lane.resume))
        if lane.already:
            log.warning("%s/%s: %d records past the checkpoint are visible on the target "
                        "(a broker that shows aborted transactions); not writing them again",
                        lane.topic, lane.partition, len(lane.already))
        lane.filtering = cp.skip > 0 or bool(lane.already)
        if cp.offset >= 0 and cp.offset != zk:
            self.consumer.seek(lane.topic, lane.partition, cp.offset)
        lane.producer.begin_transaction()
        log.info("%s/%s: resuming at 0.7 offset %d (skip %d) under transactional.id %s",
                 lane.topic, lane.partition, cp.offset, cp.skip,
                 transactional_id(self.group, lane.topic, lane.partition))

    def _write_marker(self, lane: _Lane, key: bytes, cp: Checkpoint) -> None:
        """The claim marker: a checkpoint before any data, so a scan has a start."""
        def write() -> None:
            producer = lane.producer
            producer.begin_transaction()
            producer.produce(self.config.checkpoint_topic, cp.encode(), key=key, partition=0)
            producer.commit_transaction(self.config.transaction_timeout_ms / 1000.0)

        def attempt() -> None:
            try:
                write()
            except Exception:
                self._close_producer(lane)
                lane.producer = self._new_producer(lane)
                raise

        self._retrying("writing the claim checkpoint", attempt)

    # -- revocation (coordinator thread, before the group commits and releases) -----------------

    def on_revoked(self, partitions: dict[str, list[str]]) -> None:
        with self._lock:
            for topic, names in partitions.items():
                for name in names:
                    lane = self._lanes.pop((topic, name), None)
                    if lane is None:
                        continue
                    if lane.tail is not None and self._fatal is None:
                        try:
                            self._commit_lane(lane, retry=False)
                        except Exception as exc:
                            log.warning("%s/%s: committing the last transaction before release "
                                        "failed (%r); the next owner resumes from the target's "
                                        "checkpoint", topic, name, exc)
                    self._close_producer(lane)

    def on_state(self, state: str) -> None:
        log.debug("source consumer state %s", state)

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        cfg = self.config
        txn_every = cfg.transaction_interval_ms / 1000.0
        commit_every = cfg.commit_interval_ms / 1000.0
        progress_every = cfg.progress_interval_ms / 1000.0
        now = self._clock()
        next_txn, next_commit, next_progress = now + txn_every, now + commit_every, \
            now + progress_every
        pending = 0
        while not self._stop.is_set():
            if self._fatal is not None:
                raise self._fatal
            batch = poll_parked(self.consumer.poll_view, cfg.poll_batch, 0.05, (), self.stats)
            if batch:
                with self._lock:
                    pending += self._produce(batch)
            now = self._clock()
            if now >= next_txn or pending >= cfg.transaction_max_messages:
                with self._lock:
                    self._commit_all()
                pending = 0
                next_txn = now + txn_every
            if now >= next_commit:
                self._zk_commit()
                next_commit = now + commit_every
            if self.progress is not None and now >= next_progress:
                self.progress(self.stats.snapshot())
                next_progress = now + progress_every

    def _produce(self, batch: Any) -> int:
        count = 0
        lanes = self._lanes
        for key, claim, decoded, start, end in _runs(batch):
            lane = lanes.get(key)
            if lane is None or lane.claim != claim:
                continue  # a revoked claim: never acked, the next claim resumes from the target
            count += self._produce_segment(lane, decoded, start, end)
        self.stats.add("sent", count)
        self.stats.in_flight = sum(len(lane.buffer) for lane in lanes.values())
        return count

    def _produce_segment(self, lane: _Lane, decoded: Any, start: int, end: int) -> int:
        """Produce ``decoded[start:end]`` into the lane's open transaction (the hot path: no
        call per message but librdkafka's ``produce``)."""
        from confluent_kafka import KafkaException

        producer = lane.producer
        produce = producer.produce
        topic = lane.target_topic
        source = lane.source
        fixed = lane.fixed
        route = self._router.route
        buffer = lane.buffer
        append = buffer.append
        filtering = lane.filtering
        offset, index = lane.cur_offset, lane.cur_index
        n = size = 0
        partition, key = (-1, None) if fixed is None else (fixed, None)
        track: Callable[[Any, Any], None] | None = lane.track
        for i in range(start, end):
            o, nxt, value = decoded[i]
            if o == offset:
                index += 1
            else:
                offset, index = o, 0
            if filtering and self._already(lane, o, index):
                lane.tail = (o, nxt, index)
                filtering = lane.filtering
                continue
            if fixed is None:
                r = route(lane.topic, lane.partition, value)
                partition = -1 if r.partition is None else r.partition
                key = r.key
            append((o, nxt, index, value, partition, key))
            headers = [(HEADER_SOURCE, source), (HEADER_OFFSET, b"%d" % o),
                       (HEADER_INDEX, b"0" if index == 0 else b"%d" % index)]
            if lane.failed is not None:
                pass  # buffered: the recovery at the next commit resends it
            elif track is not None:  # the segment's first record reports where it landed
                try:
                    self._send(producer, topic, value, partition, key, headers, track)
                except KafkaException as exc:
                    lane.failed = self._refused(exc, topic, value)
                track = None
            else:
                try:
                    produce(topic, value, key, partition, headers=headers)
                except BufferError:
                    self._send(producer, topic, value, partition, key, headers)
                except KafkaException as exc:
                    lane.failed = self._refused(exc, topic, value)
            n += 1
            size += len(value)
        lane.cur_offset, lane.cur_index = offset, index
        if n:
            last = buffer[-1]
            lane.tail = (last[0], last[1], last[2])
            lane.bytes += size
            producer.poll(0)  # serve delivery reports (only segments' first records have one)
        return n

    def _refused(self, exc: Any, topic: str, value: bytes) -> BaseException:
        """A produce librdkafka refused: transient (returned, the lane recovers at the next
        commit), or a message it will never take (fatal: raised; the open transactions are
        then never committed, so nothing past it is acknowledged)."""
        from confluent_kafka import KafkaError

        if exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
            self._fatal = TargetError(
                f"target client refuses a {len(value)}-byte message for {topic}: "
                f"{exc.args[0].str()} (raise target.message.max.bytes)")
            raise self._fatal from exc
        return exc  # type: ignore[no-any-return]

    @staticmethod
    def _send(producer: Any, topic: str, value: bytes, partition: int, key: bytes | None,
              headers: list[tuple[str, bytes]], on_delivery: Any = None) -> None:
        while True:
            try:
                producer.produce(topic, value, key, partition, headers=headers,
                                 on_delivery=on_delivery)
                return
            except BufferError:  # librdkafka's queue is full: let it drain
                producer.poll(0.05)

    @staticmethod
    def _already(lane: _Lane, offset: int, index: int) -> bool:
        where = (offset, index)
        if where < lane.resume:
            return True
        if where in lane.already:
            lane.already.discard(where)
            if not lane.already and lane.resume[1] == 0:
                lane.filtering = False
            return True
        return False

    # -- transactions -------------------------------------------------------------------------

    def _commit_all(self) -> None:
        for lane in list(self._lanes.values()):
            if lane.tail is not None:
                self._commit_lane(lane, retry=True)
        self.stats.in_flight = 0

    def _checkpoint(self, lane: _Lane) -> Checkpoint:
        assert lane.tail is not None
        o, nxt, index = lane.tail
        resume = (o, index + 1) if nxt == o else (nxt, 0)
        return Checkpoint(resume[0], resume[1], lane.target_topic, dict(lane.positions))

    def _commit_lane(self, lane: _Lane, *, retry: bool) -> None:
        """Append the checkpoint, commit; on failure rebuild, rescan, resend, commit again."""
        from confluent_kafka import KafkaException

        cp = self._checkpoint(lane)
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
                    self._fatal = MirrorError(
                        f"{lane.topic}/{lane.partition}: fenced on the target -- another "
                        f"mirror process claimed this partition ({err.str()})")
                    raise self._fatal from exc
                if not retry:
                    raise
                self._recover(lane, exc)
            except (MirrorError, BufferError) as exc:
                if not retry or self._fatal is not None:
                    raise
                self._recover(lane, exc)
        # committed: the data and the checkpoint are visible together
        last = lane.tail
        assert last is not None
        count, size = len(lane.buffer), lane.bytes
        if lane.resume[0] >= 0 and cp.offset > lane.resume[0]:
            self.stats.add("log_bytes", cp.offset - lane.resume[0])
        lane.resume = (cp.offset, cp.skip)
        lane.base = dict(cp.positions)
        lane.buffer = []
        lane.bytes = 0
        lane.tail = None
        self.stats.add("transactions")
        self.stats.mirrored(lane.topic, count, size)
        self.stats.healthy = True
        self._failures = 0
        state = lane.state
        self.consumer.ack(Message(state.topic, state.broker_id, state.partition_id, last[0],
                                  last[1], b"", state))
        lane.producer.begin_transaction()

    def _recover(self, lane: _Lane, exc: BaseException) -> None:
        """Rebuild the lane's producer (aborting the failed transaction), rescan, resend."""
        self.stats.add("target_errors")
        self.stats.add("retries")
        self.stats.healthy = False
        self._failures += 1
        delay = self._backoff()
        log.error("%s/%s: transaction on %s failed (%r); %d messages to resend; retrying in "
                  "%.1fs (nothing is skipped, nothing is acknowledged past it)", lane.topic,
                  lane.partition, self.description, exc, len(lane.buffer), delay)
        if self._stop.wait(delay):
            raise _Stopped("stopped during a target failure") from exc
        self._close_producer(lane)
        self._ensure_checkpoint_topic()
        lane.producer = self._retrying(
            f"initialising transactions for {lane.topic}/{lane.partition}",
            lambda: self._new_producer(lane))
        lane.positions = dict(lane.base)
        visible = self._retrying("scanning the target", lambda: scan_beyond(
            self.bootstrap, lane.target_topic, lane.base, lane.source, lane.resume))
        lane.producer.begin_transaction()
        resend = [e for e in lane.buffer if (e[0], e[2]) not in visible]
        if visible:
            log.warning("%s/%s: %d records of the failed transaction are visible on the "
                        "target anyway (aborted transactions not filtered); not resending them",
                        lane.topic, lane.partition, len(lane.buffer) - len(resend))
        producer = lane.producer
        for o, _nxt, index, value, partition, key in resend:
            headers = [(HEADER_SOURCE, lane.source), (HEADER_OFFSET, b"%d" % o),
                       (HEADER_INDEX, b"%d" % index)]
            self._send(producer, lane.target_topic, value, partition, key, headers)
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
            if self._started and self._fatal is None:
                with self._lock:
                    for lane in list(self._lanes.values()):
                        if lane.tail is not None:
                            try:
                                self._commit_lane(lane, retry=False)
                            except Exception as exc:
                                log.warning("%s/%s: last transaction not committed (%r); it "
                                            "is mirrored again on restart", lane.topic,
                                            lane.partition, exc)
                self._zk_commit()
        finally:
            try:
                self.consumer.close()  # revokes every lane (on_revoked closes producers)
            finally:
                with self._lock:
                    for lane in self._lanes.values():
                        self._close_producer(lane)
                    self._lanes.clear()
                for close in self._closers:
                    try:
                        close()
                    except Exception as exc:  # closing must not mask the real outcome
                        log.debug("mirror cleanup: %r", exc)
