"""The at-least-once mirror: consume a 0.7 group, produce to the target, commit only what is safe.

One `Mirror` is one member of a 0.7 consumer group (a `GroupConsumer` with ``auto_ack=False``),
so several mirror processes -- and Scala consumers -- share the partitions by the usual 0.7
rebalance.  It runs every ``kafka07://`` target and ``kafka://`` with ``--at-least-once``.

**The batch path.**  The loop takes whole polls (``poll_view``: no `Message` per message) and
handles each *run* -- consecutive messages of one source partition -- as one unit: routed
message by message, handed to the target in one `Target.send_run`, tracked as one entry of
the `AckTracker` (weighted by its message count) and acknowledged as one.  Per message there
is only the routing and the target client's own call.

Guarantees (docs/mirror.md):

* **Nothing lost.**  A 0.7 offset is acknowledged -- and so committed -- only after every
  message before it in that partition was acknowledged by the target (acks=all): runs are
  acknowledged in order, a run only once all its messages were.  A ``kill -9`` at any moment
  replays from the last commit: duplicates bounded by what was in flight plus one commit
  interval, never a gap.
* **Never skips.**  A failed delivery fails its run, which blocks its partition's committable
  prefix.  The loop stops consuming, lets every in-flight send finish, backs off (the shared
  `Runtime`), rebuilds the target client and resends every run from each partition's first
  failure on, in order.  Forever: an outage stops progress, it does not lose data.  Only a
  condition retrying cannot cure (`TargetError`) stops the mirror -- after committing what is
  safe.
* **Backpressure.**  At most ``max_in_flight`` messages are tracked; when full the loop stops
  polling, the consumer's queues fill, and its fetchers stop fetching.
* **Rebalance.**  ``on_revoked`` (called before the consumer commits and releases) waits up
  to ``revoke_timeout_ms`` for the revoked partitions' in-flight sends, acknowledges their
  acknowledged prefix, and forgets the rest -- the next owner replays it.
* **No loops.**  Messages a bridge wrote into 0.7 (`zkconsumer.mirror.loopguard`) are
  acknowledged and not sent -- neither on the first send nor on a resend after a failure
  (`_recover` asks the guard again for every resent run).
* **Order per source partition.**  Each run is sent with its source partition as the
  target's ordering stream (`Target.send_run`): a ``kafka://`` target's producer pool keeps
  one partition's runs on one producer.
* **Shutdown** (`stop`, e.g. from SIGTERM): stop consuming, wait up to
  ``shutdown_timeout_ms`` for in-flight acks, acknowledge, commit, close.

Each owned partition is a lane (`zkconsumer.mirror.lanes`): ACTIVE once assigned (nothing to
claim in this mode), FAILED while its runs are being resent, RELEASED when revoked.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, TypeVar

from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.message import Decoded, Message, MessageBatch, PartitionState
from zkconsumer.errors import ConsumerError, TargetError, ZkConsumerError
from zkconsumer.mirror.config import MirrorConfig, Partitioning
from zkconsumer.mirror.lanes import LaneState, LaneStatus
from zkconsumer.mirror.loopguard import LoopGuard, inside
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.routing import Router
from zkconsumer.mirror.runtime import Every, Runtime, SourceGroupEngine, SourceView, close_all
from zkconsumer.mirror.targets import RunItem, Target
from zkconsumer.mirror.tracker import AckTracker, Entry

__all__ = ["Mirror", "ack_handle", "poll_parked", "target_partitions"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class _TopicAdmin(Protocol):
    def partition_count(self, topic: str) -> int: ...
    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None: ...


def target_partitions(admin: _TopicAdmin, topic: str, config: MirrorConfig,
                      created: set[str]) -> int:
    """The partition count of target ``topic``, creating it first (once, recorded in
    ``created``) when ``--create-topics`` allows and it does not exist (`TargetError`)."""
    try:
        return admin.partition_count(topic)
    except TargetError:
        if not config.create_topics or topic in created:
            raise
    if config.partitions is None:  # MirrorConfig requires it with create_topics
        raise TargetError(f"target topic {topic} does not exist and no partition count is set")
    admin.create_topic(topic, config.partitions, config.replication_factor)
    created.add(topic)
    return admin.partition_count(topic)


def poll_parked(poll: Callable[[int, float | None], T], max_messages: int, timeout: float,
                empty: T, stats: MirrorStats) -> T:
    """``poll(max_messages, timeout)``, where one parked source partition is not the end.

    The group consumer raises a partition's error once (a corrupt message, a message above
    ``max.fetch.size``, a misaligned or unreadable committed offset) and parks only that
    partition, retrying it later; the others go on.  The mirror logs it, counts it and keeps
    mirroring, as ``zkconsumer run`` does; `ConsumerError` (the consumer itself is done) still
    ends the run.
    """
    try:
        return poll(max_messages, timeout)
    except ConsumerError:
        raise
    except ZkConsumerError as exc:
        stats.add("partition_errors")
        log.error("source partition stopped: %s", exc, extra={"event": "partition_error"})
        return empty


def ack_handle(state: PartitionState, offset: int, next_offset: int) -> Message:
    """A `Message` that acknowledges everything of ``state``'s claim up to ``offset``."""
    return Message(state.topic, state.broker_id, state.partition_id, offset, next_offset, b"",
                   state)


class _Run:
    """Messages ``decoded[start:end]`` of one claim of one partition, tracked as one entry."""

    __slots__ = ("decoded", "end", "start", "state")

    def __init__(self, state: PartitionState, decoded: Decoded, start: int, end: int) -> None:
        self.state = state
        self.decoded = decoded
        self.start = start
        self.end = end


class _Listener:
    """Adapter to the consumer's listener interface (duck-typed: on_assigned/revoked/state)."""

    def __init__(self, mirror: Mirror) -> None:
        self._mirror = mirror

    def on_assigned(self, partitions: dict[str, list[str]]) -> None:
        self._mirror._on_assigned(partitions)

    def on_revoked(self, partitions: dict[str, list[str]]) -> None:
        self._mirror._on_revoked(partitions)

    def on_state(self, state: str) -> None:
        log.debug("source consumer state %s", state)


class Mirror(SourceGroupEngine):
    """One at-least-once mirror process (see the module docstring)."""

    def __init__(self, config: MirrorConfig, consumer: GroupConsumer, target: Target, *,
                 source_partitions: Callable[[str], Sequence[str]],
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 closers: Sequence[Callable[[], None]] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.consumer = consumer
        self.target = target
        self.stats = MirrorStats()
        self.runtime = Runtime(config, self.stats, target.description, clock=clock)
        self.progress = progress
        self.view: SourceView | None = None  # set by runner.build_mirror (lag, loops)
        self._send_lock = threading.Lock()
        self._tracker: AckTracker[_Run, None] = AckTracker(config.max_in_flight)
        self._router = Router(
            partitioning=config.partitioning, topic_map=config.topic_map,
            target_partitions=self._target_partitions, source_partitions=source_partitions,
            hash_partition=target.hash_partition, key_regex=config.key_pattern())
        self._lanes: dict[Hashable, LaneStatus] = {}
        self._acked: dict[Hashable, int] = {}  # per partition: next offset acknowledged
        self._guard: LoopGuard | None = None
        self._created: set[str] = set()
        self._started = False  # the consumer joined the group (so there is something to commit)
        self._closing = False
        self._closers = list(closers)
        self._listen(consumer)

    # -- control (stop, run: `RuntimeEngine`) --------------------------------------------------

    def _start(self) -> None:
        self.runtime.retrying(f"connecting to target {self.target.description}",
                              self.target.open)
        if self.view is not None:
            self._guard = LoopGuard(self.view, wait=self.runtime.wait,
                                    read=self.runtime.zookeeper_read,
                                    wait_limit=self.config.flush_wait_ms / 1000.0,
                                    marked=self.config.target.kind != "kafka")
        self._join_source()
        self._started = True

    def _listen(self, consumer: GroupConsumer) -> None:
        consumer.add_listener(_Listener(self))

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        cfg = self.config
        clock = self.runtime.clock
        commit = Every(cfg.commit_interval_ms / 1000.0, clock)
        progress = Every(cfg.progress_interval_ms / 1000.0, clock)
        tracker = self._tracker
        while not self.runtime.stopping:
            self.runtime.check()
            if tracker.has_failures:
                self._recover()
                continue
            room = tracker.room()
            if room <= 0:
                tracker.wait_for_room(0.1)  # wakes on a newly acknowledged prefix too
            else:
                # while sends are unacknowledged an idle source is asked briefly, so their
                # acknowledgements are drained (and counted, and committable) within ~10 ms
                wait = 0.01 if tracker.pending else 0.1
                batch = poll_parked(self.consumer.poll_view, min(room, cfg.poll_batch), wait,
                                    MessageBatch([]), self.stats)
                if batch:
                    with self._send_lock:
                        self._send(batch)
            self._ack()
            now = clock()
            if commit.due(now):
                self._commit()
            if self.progress is not None and progress.due(now):
                self.progress(self.stats.snapshot())

    def _send(self, batch: MessageBatch) -> None:
        guard = self._guard
        if guard is not None:
            guard.new_poll()
        tracker = self._tracker
        for state, decoded, start, end in batch.runs():
            run = _Run(state, decoded, start, end)
            bridged = self._bridged(run)
            size = sum(len(decoded[i][2]) for i in range(start, end))
            entry = tracker.add(state.key, run, None, size, end - start)
            self._dispatch(entry, bridged)

    def _bridged(self, run: _Run) -> list[tuple[int, int]]:
        """The loop guard's bridge ranges that may hold ``run``'s offsets ([] without one)."""
        guard = self._guard
        if guard is None:
            return []
        return guard.ranges(run.state.topic, run.state.name, run.decoded[run.end - 1][0])

    def _items(self, run: _Run, bridged: list[tuple[int, int]]) -> list[RunItem]:
        """The run's messages as ``(value, partition, key)``, bridged ones left out."""
        state, decoded = run.state, run.decoded
        topic, name = state.topic, state.name
        route = self._router.route
        if self.config.partitioning is Partitioning.PRESERVE and not bridged:
            partition = route(topic, name, b"").partition  # one target partition per source
            return [(decoded[i][2], partition, None) for i in range(run.start, run.end)]
        items: list[RunItem] = []
        for i in range(run.start, run.end):
            o, _nxt, value = decoded[i]
            if bridged and inside(bridged, o):
                continue
            r = route(topic, name, value)
            items.append((value, r.partition, r.key))
        return items

    def _dispatch(self, entry: Entry[_Run, None], bridged: list[tuple[int, int]] | None
                  ) -> None:
        """Send ``entry``'s run without its ``bridged`` ranges (None: ask the loop guard now;
        a failure to ask fails the run, which is then retried like a failed delivery)."""
        run = entry.message
        attempt = entry.attempt
        tracker = self._tracker
        stats = self.stats
        runtime = self.runtime

        def done(exc: BaseException | None) -> None:
            if exc is None:
                tracker.complete(entry, attempt)
                return
            stats.add("target_errors")
            if isinstance(exc, TargetError):
                runtime.fail(exc)  # retrying cannot cure it: the loop stops
            tracker.fail(entry, attempt, exc)

        try:
            items = self._items(run, self._bridged(run) if bridged is None else bridged)
            looped = run.end - run.start - len(items)
            if looped:
                stats.add("looped", looped)
            stats.add("sent", len(items))
            self.target.send_run(self._router.target_topic(run.state.topic), items, done,
                                 stream=run.state.key)
        except TargetError as exc:
            tracker.fail(entry, attempt, exc)  # settled, so shutdown does not wait for it
            raise
        except Exception as exc:  # metadata or ZooKeeper hiccup while routing: retry later
            done(exc)

    def _ack(self, keys: Sequence[Hashable] | None = None) -> None:
        drained = self._tracker.drain_acked(keys)
        for key, d in drained.items():
            run = d.message
            o, nxt, _v = run.decoded[run.end - 1]
            self.consumer.ack(ack_handle(run.state, o, nxt))
            start = self._acked.get(key, run.decoded[run.start][0])
            self._acked[key] = nxt
            self.stats.add("log_bytes", max(0, nxt - start))
            self.stats.mirrored(run.state.topic, d.count, d.size)
        if drained:
            self.runtime.succeeded()
            self.stats.healthy = not self._tracker.has_failures
        self.stats.in_flight = self._tracker.in_flight

    def _commit(self) -> None:
        try:
            self.consumer.commit()
            self.stats.add("commits")
        except ZkConsumerError as exc:  # ZooKeeper away: the next interval tries again
            log.warning("offset commit failed (will retry): %s", exc)

    def _recover(self) -> None:
        """A delivery failed: settle, back off, rebuild the target client, resend in order."""
        tracker = self._tracker
        failing = [key for key in tracker.keys() if key in self._lanes]  # noqa: SIM118
        for key in failing:
            self._lanes[key].move(LaneState.FAILED, repr(tracker.last_error))
        while not tracker.wait_settled(0.2):
            self._ack()  # earlier successes still become committable meanwhile
            if self.runtime.stopping or self.runtime.fatal is not None:
                return
        self._ack()
        self.runtime.backoff_wait(f"a delivery ({tracker.in_flight} messages in flight)",
                                  tracker.last_error)
        self.target.reset()
        self._router.forget_counts()
        try:
            self.target.open()
            # one partition-count question per topic now, not one (timing out) per resend
            for key in tracker.keys():  # noqa: SIM118 - a method, not a dict
                self._router.target_count(self._router.target_topic(key[0]))  # type: ignore[index]
        except ZkConsumerError:
            raise
        except Exception as exc:
            log.warning("target %s still unavailable: %r", self.target.description, exc)
            return  # failures stay FAILED: the next loop turn comes back here
        with self._send_lock:
            entries = tracker.take_retry()
            log.info("resending %d messages from the first failure of each partition",
                     sum(e.weight for e in entries))
            if self._guard is not None:
                self._guard.new_poll()
            for entry in entries:
                self._dispatch(entry, None)  # None: ask the guard again (no loops on a resend)
        for key in failing:
            lane = self._lanes.get(key)
            if lane is not None and lane.live:
                lane.move(LaneState.ACTIVE, "resent")

    # -- routing helpers ----------------------------------------------------------------------

    def _target_partitions(self, topic: str) -> int:
        return target_partitions(self.target, topic, self.config, self._created)

    # -- rebalance and shutdown -----------------------------------------------------------------

    def _on_assigned(self, partitions: dict[str, list[str]]) -> None:
        for topic, names in partitions.items():
            for name in names:
                lane = self._lanes[(topic, name)] = LaneStatus(f"{topic}/{name}")
                lane.move(LaneState.ACTIVE, "assigned (at-least-once: nothing to claim)")
        log.info("mirror assigned %s", partitions)

    def _on_revoked(self, partitions: dict[str, list[str]]) -> None:
        keys: list[Hashable] = [(t, p) for t, ps in partitions.items() for p in ps]
        if not keys:
            return
        timeout = 0.0 if self._closing else self.config.revoke_timeout_ms / 1000.0
        with self._send_lock:
            settled = self._tracker.wait_settled(timeout, keys)
            self._ack(keys)
            dropped = self._tracker.forget(keys)
        for key in keys:
            lane = self._lanes.pop(key, None)
            self._acked.pop(key, None)
            if lane is not None and lane.live:
                lane.move(LaneState.RELEASED, "revoked")
        if dropped:
            log.warning("%d messages of revoked partitions were not acknowledged by the target "
                        "%s; the next owner replays them", dropped,
                        "in time" if not settled else "(failed deliveries)")

    def _shutdown(self) -> None:
        deadline = self.runtime.clock() + self.config.shutdown_timeout_ms / 1000.0

        def left() -> float:
            return max(0.0, deadline - self.runtime.clock())

        try:
            if self._started:
                if not self._tracker.has_failures:
                    self.target.flush(left())
                self._tracker.wait_settled(left())
                self._ack()
                if self._tracker.in_flight:
                    log.warning("shutting down with %d messages not acknowledged by the "
                                "target; they will be mirrored again on restart",
                                self._tracker.in_flight)
                self._commit()
        finally:
            self._closing = True  # close() revokes everything: no point waiting again
            try:
                self.consumer.close()
            finally:
                try:
                    self.target.close(left())
                finally:
                    close_all(self._closers)
