"""The mirror loop: consume a 0.7 group, produce to the target, commit only what is safe.

One `Mirror` is one member of a 0.7 consumer group (a `GroupConsumer` with ``auto_ack=False``),
so several mirror processes -- and Scala consumers -- share the partitions by the usual 0.7
rebalance.  For each polled message the loop routes it (`Router`), hands it to the target
client, and records it in the `AckTracker`.  The tracker's in-order rule decides what gets
``ack``-ed to the consumer; the consumer commits only acknowledged offsets.

Guarantees (docs/mirror.md):

* **Nothing lost.**  A 0.7 offset is acknowledged -- and so committed -- only after every
  message before it in that partition was acknowledged by the target (acks=all).  A
  ``kill -9`` at any moment therefore replays from the last commit: duplicates bounded by what
  was in flight plus one commit interval, never a gap.
* **Never skips.**  A failed delivery blocks its partition's committable prefix.  The loop
  stops consuming, lets every in-flight send finish, backs off (exponentially, capped),
  rebuilds the target client and resends from each partition's first failure on, in order.
  Forever: an outage stops progress, it does not lose data.  Only a condition retrying
  cannot cure (`TargetError`: missing target topic without ``--create-topics``, a message
  the client refuses locally) stops the mirror -- after committing what is safe.
* **Backpressure.**  At most ``max_in_flight`` messages are tracked; when full the loop stops
  polling, the consumer's queues fill, and its fetchers stop fetching.
* **Rebalance.**  ``on_revoked`` (called before the consumer commits and releases) waits up
  to ``revoke_timeout_ms`` for the revoked partitions' in-flight sends, acknowledges their
  acknowledged prefix, and forgets the rest -- the next owner replays it.
* **Shutdown** (`stop`, e.g. from SIGTERM): stop consuming, wait up to
  ``shutdown_timeout_ms`` for in-flight acks, acknowledge, commit, close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol, TypeVar

from zkconsumer.errors import ConsumerError, TargetError, ZkConsumerError
from zkconsumer.mirror.config import MirrorConfig
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.routing import Router
from zkconsumer.mirror.runtime import SourceView
from zkconsumer.mirror.targets import Target
from zkconsumer.mirror.tracker import AckTracker, Entry

__all__ = ["Mirror", "SourceConsumer", "SourceMessage"]

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


class SourceMessage(Protocol):
    topic: str
    offset: int
    next_offset: int
    value: bytes

    @property
    def partition(self) -> str: ...


class SourceConsumer(Protocol):
    """The part of `GroupConsumer` the mirror uses."""

    def start(self) -> None: ...
    def poll_batch(self, max_messages: int, timeout: float | None) -> Sequence[Any]: ...
    def ack(self, message: Any) -> None: ...
    def commit(self) -> None: ...
    def close(self) -> None: ...
    def add_listener(self, listener: Any) -> None: ...


class _Listener:
    """Adapter to the consumer's listener interface (duck-typed: on_assigned/revoked/state)."""

    def __init__(self, mirror: Mirror) -> None:
        self._mirror = mirror

    def on_assigned(self, partitions: dict[str, list[str]]) -> None:
        log.info("mirror assigned %s", partitions)

    def on_revoked(self, partitions: dict[str, list[str]]) -> None:
        self._mirror._on_revoked(partitions)

    def on_state(self, state: str) -> None:
        log.debug("source consumer state %s", state)


class Mirror:
    """One mirror process's worth of work (see module docstring)."""

    def __init__(self, config: MirrorConfig, consumer: SourceConsumer, target: Target, *,
                 source_partitions: Callable[[str], Sequence[str]],
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 closers: Sequence[Callable[[], None]] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.consumer = consumer
        self.target = target
        self.stats = MirrorStats()
        self.progress = progress
        self.view: SourceView | None = None  # set by runner.build_mirror (lag, preserve)
        self._clock = clock
        self._stop = threading.Event()
        self._send_lock = threading.Lock()
        self._tracker: AckTracker[Any, Any] = AckTracker(config.max_in_flight)
        self._router = Router(
            partitioning=config.partitioning, topic_map=config.topic_map,
            target_partitions=self._target_partitions, source_partitions=source_partitions,
            hash_partition=target.hash_partition, key_regex=config.key_pattern())
        self._failures = 0  # consecutive failed retry rounds, for the backoff
        self._created: set[str] = set()
        self._fatal: BaseException | None = None
        self._started = False  # the consumer joined the group (so there is something to commit)
        self._closing = False
        self._closers = list(closers)
        consumer.add_listener(_Listener(self))

    # -- control ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask `run` to finish (safe from a signal handler or another thread)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Mirror until `stop`; then shut down cleanly.  Raises on a fatal error (after
        committing everything that is safe)."""
        try:
            self._open_target()
            if not self._stop.is_set():
                self.consumer.start()
                self._started = True
                self._loop()
        finally:
            self._shutdown()

    # -- the loop -----------------------------------------------------------------------------

    def _open_target(self) -> None:
        while not self._stop.is_set():
            try:
                self.target.open()
                self._failures = 0
                return
            except ZkConsumerError:
                raise
            except Exception as exc:  # the target is not there yet: wait, do not give up
                self._failures += 1
                delay = self._backoff()
                log.warning("cannot connect to target %s (%r); retrying in %.1fs",
                            self.target.description, exc, delay)
                self._stop.wait(delay)

    def _loop(self) -> None:
        cfg = self.config
        commit_every = cfg.commit_interval_ms / 1000.0
        progress_every = cfg.progress_interval_ms / 1000.0
        next_commit = self._clock() + commit_every
        next_progress = self._clock() + progress_every
        while not self._stop.is_set():
            if self._fatal is not None:
                raise self._fatal
            if self._tracker.has_failures:
                self._recover()
                continue
            room = self._tracker.room()
            if room <= 0:
                self._tracker.wait_for_room(0.1)
            else:
                none: Sequence[Any] = ()
                batch = poll_parked(self.consumer.poll_batch, min(room, cfg.poll_batch), 0.1,
                                    none, self.stats)
                if batch:
                    with self._send_lock:
                        for message in batch:
                            self._send(message)
                    self.stats.add("sent", len(batch))
            self._ack()
            now = self._clock()
            if now >= next_commit:
                self._commit()
                next_commit = now + commit_every
            if self.progress is not None and now >= next_progress:
                self.progress(self.stats.snapshot())
                next_progress = now + progress_every

    def _send(self, message: Any) -> None:
        key = (message.topic, message.partition)
        entry = self._tracker.add(key, message, None, len(message.value))
        self._dispatch(entry)

    def _dispatch(self, entry: Entry[Any, Any]) -> None:
        message = entry.message
        attempt = entry.attempt
        tracker = self._tracker
        stats = self.stats

        def done(exc: BaseException | None) -> None:
            if exc is None:
                tracker.complete(entry, attempt)
                return
            stats.add("target_errors")
            if isinstance(exc, TargetError) and self._fatal is None:
                self._fatal = exc  # retrying cannot cure it: the loop stops
            tracker.fail(entry, attempt, exc)

        try:
            route = self._router.route(message.topic, message.partition, message.value)
            entry.route = route
            self.target.send(route.topic, message.value, route.partition, route.key, done)
        except TargetError as exc:
            tracker.fail(entry, attempt, exc)  # settled, so shutdown does not wait for it
            raise
        except Exception as exc:  # metadata or ZooKeeper hiccup while routing: retry later
            done(exc)

    def _ack(self, keys: Sequence[Hashable] | None = None) -> None:
        drained = self._tracker.drain_acked(keys)
        for key, d in drained.items():
            self.consumer.ack(d.message)
            self.stats.mirrored(key[0], d.count, d.size)  # type: ignore[index]
        if drained:
            self._failures = 0
            self.stats.healthy = not self._tracker.has_failures
        self.stats.in_flight = self._tracker.in_flight

    def _commit(self) -> None:
        try:
            self.consumer.commit()
            self.stats.add("commits")
        except ZkConsumerError as exc:  # ZooKeeper away: the next interval tries again
            log.warning("offset commit failed (will retry): %s", exc)

    def _backoff(self) -> float:
        cfg = self.config
        n = max(1, self._failures)
        return min(cfg.retry_backoff_max_ms, cfg.retry_backoff_ms * (1 << min(n - 1, 20))) / 1000.0

    def _recover(self) -> None:
        """A delivery failed: settle, back off, rebuild the target client, resend in order."""
        self.stats.healthy = False
        self._failures += 1
        self.stats.add("retries")
        log.error("target %s failed a delivery (%r); %d in flight; retrying in %.1fs "
                  "(nothing is skipped, offsets are not advanced past it)",
                  self.target.description, self._tracker.last_error, self._tracker.in_flight,
                  self._backoff())
        while not self._tracker.wait_settled(0.2):
            self._ack()  # earlier successes still become committable meanwhile
            if self._stop.is_set() or self._fatal is not None:
                return
        self._ack()
        if self._stop.wait(self._backoff()):
            return
        self.target.reset()
        self._router.forget_counts()
        try:
            self.target.open()
            # one partition-count question per topic now, not one (timing out) per resend
            for key in self._tracker.keys():  # noqa: SIM118 - a method, not a dict
                self._router.target_count(self._router.target_topic(key[0]))  # type: ignore[index]
        except ZkConsumerError:
            raise
        except Exception as exc:
            log.warning("target %s still unavailable: %r", self.target.description, exc)
            return  # failures stay FAILED: the next loop turn comes back here
        with self._send_lock:
            entries = self._tracker.take_retry()
            log.info("resending %d messages from the first failure of each partition",
                     len(entries))
            for entry in entries:
                self._dispatch(entry)
            self.stats.add("sent", len(entries))

    # -- routing helpers ----------------------------------------------------------------------

    def _target_partitions(self, topic: str) -> int:
        return target_partitions(self.target, topic, self.config, self._created)

    # -- rebalance and shutdown -----------------------------------------------------------------

    def _on_revoked(self, partitions: dict[str, list[str]]) -> None:
        keys: list[Hashable] = [(t, p) for t, ps in partitions.items() for p in ps]
        if not keys:
            return
        timeout = 0.0 if self._closing else self.config.revoke_timeout_ms / 1000.0
        with self._send_lock:
            settled = self._tracker.wait_settled(timeout, keys)
            self._ack(keys)
            dropped = self._tracker.forget(keys)
        if dropped:
            log.warning("%d messages of revoked partitions were not acknowledged by the target "
                        "%s; the next owner replays them", dropped,
                        "in time" if not settled else "(failed deliveries)")

    def _shutdown(self) -> None:
        timeout = self.config.shutdown_timeout_ms / 1000.0
        deadline = self._clock() + timeout
        try:
            if self._started:
                if not self._tracker.has_failures:
                    self.target.flush(max(0.0, deadline - self._clock()))
                self._tracker.wait_settled(max(0.0, deadline - self._clock()))
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
                    self.target.close(max(0.0, deadline - self._clock()))
                finally:
                    for close in self._closers:
                        try:
                            close()
                        except Exception as exc:  # closing must not mask the real outcome
                            log.debug("mirror cleanup: %r", exc)
