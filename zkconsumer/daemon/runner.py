"""`Daemon`: the ``zkconsumer run`` main loop -- poll, hand to the sink, ack, commit, stop.

One thread (the caller's, normally the process main thread, where signals arrive) runs the
loop::

    while not stopping:
        if the sink has room (in-flight < --max-in-flight): poll a batch, submit it
        else: wait for acknowledgements            <- backpressure
        hand the sink's acknowledgements to the consumer (GroupConsumer.ack)
        every autocommit.interval.ms: sink.sync() (fsync), then GroupConsumer.commit()

The at-least-once argument: the consumer runs with ``auto_ack=False`` and no autocommit, so
the only offsets ever written are those of messages the sink acknowledged, and each commit is
preceded by `Sink.sync`.  Hence a ``kill -9`` of the daemon (or of an exec child) at any
moment loses nothing; it replays at most what was acknowledged since the last commit plus
the in-flight window.

Rebalances (`_Listener.on_revoked`, on the consumer's coordinator thread, *before* the
consumer commits and releases): wait up to ``--revoke-timeout`` for work already handed to
user code, ack what the sink acknowledged, fsync, then abandon the rest (`AckTracker.revoke`,
`Sink.abandon`) -- the next owner re-reads it from the committed offset.

A stop while the member is still starting (connecting, or its first rebalance backing off
on a killed predecessor's owners) closes it at once (`StartGuard`) and `run` returns 0.

Shutdown (`request_stop`, from SIGTERM/SIGINT): stop polling, wait for in-flight work, close
the sink, ack, commit, close the consumer -- which ends the ZooKeeper session so our ids and
owner znodes vanish and peers rebalance at once.  ``--shutdown-timeout`` bounds all of it,
counted from the signal, even while ZooKeeper hangs or an exec child ignores SIGTERM: the
time is split up front (`_stop_budget`) -- waiting for in-flight work, closing the sink
(for exec: EOF, SIGTERM, SIGKILL of its process group), then the final commit, which writes
every partition at once with one deadline (`GroupConsumer.commit` with a timeout; what it
could not write is logged), and leaving the group.

Health (`health`, for ``/healthz``): besides a lost session and an idle member, a member that
may be *deaf* -- its ZooKeeper watches not armed, or what it owns disagreeing with the
group's reference decision -- for longer than ``--health-idle-timeout`` is unhealthy.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from zkconsumer.consumer import GroupConsumer
from zkconsumer.consumer.joining import StartGuard, join_group
from zkconsumer.daemon.config import DaemonConfig
from zkconsumer.daemon.health import Deafness, IdleVerdict, read_idle_verdict
from zkconsumer.daemon.metrics import DaemonMetrics, Snapshot
from zkconsumer.daemon.sinks import Sink, make_sink
from zkconsumer.daemon.topics import TopicPresence
from zkconsumer.daemon.tracker import AckTracker, Key
from zkconsumer.errors import ConsumerError, SinkError, ZkConsumerError
from zkconsumer.telemetry.http import MetricsServer
from zkconsumer.telemetry.progress import Progress

__all__ = ["Daemon"]

log = logging.getLogger(__name__)

_POLL_TIMEOUT = 0.1  # bounds how long a stop request or a due commit waits


def _keys(partitions: dict[str, list[str]]) -> set[Key]:
    out: set[Key] = set()
    for topic, names in partitions.items():
        for name in names:
            broker, _, part = name.partition("-")
            out.add((topic, int(broker), int(part)))
    return out


class Daemon:
    """Run one consumer-group member feeding one sink until `request_stop`."""

    def __init__(self, config: DaemonConfig, *, sink: Sink | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 progress_stream: TextIO | None = None) -> None:
        self.config = config
        self.tracker = AckTracker()
        self.sink = sink if sink is not None else make_sink(config, self.tracker)
        self._clock = clock
        self._stop = threading.Event()
        self._stop_requested_at: float | None = None  # clock() of the first stop request
        self._reopen = threading.Event()
        self._ack_lock = threading.Lock()
        self._consumer: GroupConsumer | None = None
        self._guard: StartGuard | None = None  # closes a member still starting on a stop
        self._fatal: BaseException | None = None
        self._sink_closed = False
        # counters (main thread) and state (listener thread) read by metrics/health
        self.consumed_messages = 0
        self.consumed_bytes = 0
        self.commits = 0
        self.commit_failures = 0
        self.rebalances = 0
        self.session_losses = 0
        self.partition_errors = 0
        self.state = "INIT"
        self._session_lost = False
        self._zk_unreachable: str | None = None  # why ZooKeeper is not answering at start-up
        self._owned = 0
        self._idle_since: float | None = clock()
        self._idle_cache: tuple[float, IdleVerdict] | None = None
        self.topics = TopicPresence(config.subscription)  # subscribed, not registered
        self._deafness = Deafness()  # /healthz: watches unarmed, assignment drift
        self.metrics = DaemonMetrics(self.snapshot)
        self._server: MetricsServer | None = None
        self._progress = (Progress(progress_stream or sys.stderr) if config.progress else None)

    # -- control (signal-handler safe: only set flags) -----------------------------------------

    def request_stop(self) -> None:
        if self._stop_requested_at is None:
            self._stop_requested_at = self._clock()
        self._stop.set()
        with self.tracker.cond:
            self.tracker.cond.notify_all()

    def request_reopen(self) -> None:
        self._reopen.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def consumer(self) -> GroupConsumer | None:
        """The group member (None before `run` created it)."""
        return self._consumer

    @property
    def metrics_port(self) -> int | None:
        return self._server.port if self._server is not None else None

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        """Consume until stopped; returns 0, or raises what made it stop (e.g. `SinkError`)."""
        cfg = self.config
        if cfg.metrics_port is not None:
            self._server = MetricsServer(cfg.metrics_host, cfg.metrics_port, self.metrics,
                                         self.health)
            self._server.start()
        try:
            self.sink.start()
            consumer = self._start_consumer()
            if consumer is None:  # stopped (or the sink gave up) before it could join
                if self._guard is not None:
                    self._guard.wait()
                self.sink.close(self._stop_left() if self.stopping else cfg.shutdown_timeout)
                if self.sink.failure is not None:
                    raise self.sink.failure
                return 0
            try:
                self._loop(consumer)
            finally:
                self._shutdown(consumer)
        except BaseException:
            self.sink.close(0.0)
            raise
        finally:
            if self._progress is not None:
                self._progress.finish()
            if self._server is not None:
                self._server.close()
        if self._fatal is not None:
            raise self._fatal
        return 0

    def _start_consumer(self) -> GroupConsumer | None:
        """Join the group (`join_group`): retry until it works, we are stopped, the sink
        failed or ``--startup-timeout`` passed -- a ZooKeeper that does not answer yet
        (``/healthz`` 503 "not connected to ZooKeeper") and a failed first rebalance (a
        killed predecessor's owners) are waited for, not exited on."""
        cfg = self.config

        def unreachable(reason: str | None) -> None:
            self._zk_unreachable = reason

        self._guard = StartGuard(self._stop, self._stop_left)
        return join_group(self._join, self._guard, self._stop,
                          rebalance_backoff_ms=cfg.consumer.rebalance_backoff_ms,
                          startup_timeout=cfg.startup_timeout, on_unreachable=unreachable,
                          give_up=lambda: self.sink.failure is not None)

    def _join(self) -> GroupConsumer:
        """A new member (a new consumer id) for one attempt to join."""
        cfg = self.config
        consumer = GroupConsumer(cfg.consumer, cfg.subscription)
        consumer.add_listener(_Listener(self))
        self.topics.watch(consumer)
        self._consumer = consumer
        log.info("starting member of group %s (%s) -> %s %s", cfg.consumer.group_id,
                 consumer.consumer_id, cfg.sink, cfg.target,
                 extra={"event": "start", "consumer_id": consumer.consumer_id})
        return consumer

    def _stop_left(self, reserve: float = 0.0) -> float:
        """Seconds left of ``--shutdown-timeout``, counted from the first stop request."""
        started = self._stop_requested_at
        deadline = (self._clock() if started is None else started) + self.config.shutdown_timeout
        return max(0.0, deadline - reserve - self._clock())

    def _loop(self, consumer: GroupConsumer) -> None:
        cfg = self.config
        sink = self.sink
        cond = self.tracker.cond
        interval = cfg.commit_interval
        next_commit = self._clock() + interval if interval else None
        next_tick = 0.0
        while not self._stop.is_set():
            if self._reopen.is_set():
                self._reopen.clear()
                sink.reopen()
            room = cfg.max_in_flight - sink.inflight()
            if room > 0:
                try:
                    # the batch path: decoded columns, no object per message unless the
                    # sink needs them (Sink.submit_columns)
                    batch = consumer.poll_columns(min(room, cfg.batch_size), _POLL_TIMEOUT)
                except ConsumerError:
                    raise
                except ZkConsumerError as exc:
                    # A fetcher parked one partition (message above max.fetch.size, corrupt
                    # data, a misaligned or unreadable offset): the others go on; it is
                    # claimed afresh at the next rebalance, and after 30 s at the latest.
                    self.partition_errors += 1
                    log.error("partition stopped: %s", exc, extra={"event": "partition_error"})
                    continue
                if batch:
                    self.consumed_messages += len(batch)
                    self.consumed_bytes += batch.payload_bytes
                    sink.submit_columns(batch)
            else:
                with cond:
                    if sink.inflight() >= cfg.max_in_flight and not self._stop.is_set():
                        cond.wait(_POLL_TIMEOUT)
            now = self._clock()
            if next_commit is not None and now >= next_commit:
                self._commit(consumer)
                next_commit = now + (interval or 0.0)
            if now >= next_tick:
                next_tick = now + 0.5
                self._tick(consumer, now)
            if self.sink.failure is not None and self._fatal is None:
                # e.g. an exec command that cannot be started: what was acknowledged is
                # handed over (and committed at shutdown), nothing else.
                self._sync_and_ack(consumer)
                self._fatal = self.sink.failure
            if self._fatal is not None:
                break

    def _sync_and_ack(self, consumer: GroupConsumer) -> None:
        """Hand the sink's acknowledgements to the consumer, once they are durable.

        Taken *before* `Sink.sync`, so every acknowledgement handed over was recorded before
        the sync began; if the sync fails none is handed over (and none can be committed,
        not even by the consumer's own commit on rebalance or close).
        """
        with self._ack_lock:
            messages = self.tracker.take()
            if self._fatal is not None:
                return  # the sink failed: nothing more may be committed
            self.sink.sync()
            for message in messages:
                consumer.ack(message)  # type: ignore[arg-type]

    def _commit(self, consumer: GroupConsumer, timeout: float | None = None) -> None:
        self._sync_and_ack(consumer)
        started = time.perf_counter()
        try:
            consumer.commit(timeout)
        except ZkConsumerError as exc:
            self.commit_failures += 1
            log.warning("commit failed: %s", exc, extra={"event": "commit_failed"})
            return
        self.commits += 1
        self.metrics.commit_latency.observe(time.perf_counter() - started)

    def _tick(self, consumer: GroupConsumer, now: float) -> None:
        owned = sum(len(v) for v in consumer.owned_partitions().values())
        self._owned = owned
        if owned:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now
        if self._progress is not None:
            self._progress.update(self.consumed_messages, self.consumed_bytes,
                                  self._total_lag(consumer), owned, self.sink.inflight())

    def _shutdown(self, consumer: GroupConsumer) -> None:
        if self._stop_requested_at is None:  # the sink failed: the budget counts from now
            self._stop_requested_at = self._clock()
        sink_time, tail_time = _stop_budget(self.config.shutdown_timeout)
        left = self._stop_left

        log.info("stopping: finishing %d in-flight messages (up to %.1fs)", self.sink.inflight(),
                 left(sink_time + tail_time), extra={"event": "stopping"})
        if self._fatal is None and not self.sink.drain(left(sink_time + tail_time)):
            log.warning("shutdown timeout: %d unacknowledged messages are handed back (the "
                        "next owner re-reads them)", self.sink.inflight(),
                        extra={"event": "shutdown_timeout"})
        try:
            self.sink.close(left(tail_time))
            self._sink_closed = True
            # all partitions at once, within what is left (a hung ZooKeeper must not hold
            # the stop past --shutdown-timeout: a supervisor would kill -9 us meanwhile);
            # what could not be written is logged by the consumer
            self._commit(consumer, max(0.05, 0.7 * left()))
        except SinkError as exc:
            log.error("%s; not committing what was written since the last commit", exc)
            self._fatal = self._fatal or exc
        finally:
            consumer.close(timeout=max(0.05, left()))
        log.info("stopped: %d messages consumed, %d acknowledged, %d commits",
                 self.consumed_messages, self.tracker.acked_messages, self.commits,
                 extra={"event": "stopped"})

    # -- rebalance hooks (coordinator thread) --------------------------------------------------

    def _revoked(self, partitions: dict[str, list[str]]) -> None:
        keys = _keys(partitions)
        log.info("rebalance: releasing %s", partitions,
                 extra={"event": "rebalance_revoke", "partitions": partitions})
        if not self._sink_closed:  # (close() of the consumer revokes too, after the sink)
            self.rebalances += 1
            if self.sink.failure is None and not self.sink.drain(self.config.revoke_timeout):
                log.warning("rebalance: in-flight messages not acknowledged within %.1fs are "
                            "abandoned (the next owner re-reads them)",
                            self.config.revoke_timeout, extra={"event": "rebalance_abandon"})
        consumer = self._consumer
        try:
            if consumer is not None:
                self._sync_and_ack(consumer)
        except SinkError as exc:  # cannot vouch for the output: stop committing more
            log.error("%s; stopping", exc)
            self._fatal = self._fatal or exc
            self._stop.set()
        self.tracker.revoke(keys)
        self.sink.abandon(keys)

    def _assigned(self, partitions: dict[str, list[str]]) -> None:
        log.info("rebalance: assigned %s", partitions,
                 extra={"event": "rebalance_assign", "partitions": partitions})
        if any(partitions.values()):
            self._idle_since = None

    def _state(self, state: str) -> None:
        self.state = state
        if state == "SESSION_LOST":
            self._session_lost = True
            self.session_losses += 1
        elif state in ("STABLE", "RESUMED"):
            self._session_lost = False
        level = logging.WARNING if state in ("SUSPENDED", "SESSION_LOST",
                                             "REBALANCE_FAILED") else logging.INFO
        log.log(level, "consumer state %s", state, extra={"event": "state", "state": state})
        consumer = self._consumer
        if state == "STABLE" and consumer is not None:
            owned = consumer.owned_partitions()
            log.info("rebalance done: owning %s", owned,
                     extra={"event": "rebalance_done", "partitions": owned})

    # -- metrics and health --------------------------------------------------------------------

    def _total_lag(self, consumer: GroupConsumer) -> int | None:
        lags = [p.get("lag") for p in consumer.stats.partitions.values()]
        known = [x for x in lags if x is not None]
        return sum(known) if known else None

    def snapshot(self) -> Snapshot:
        """Current counters (any thread)."""
        consumer = self._consumer
        lag: dict[tuple[str, str], int] = {}
        if consumer is not None:
            for name, part in consumer.stats.partitions.items():
                if part.get("lag") is not None:
                    topic, _, pname = name.rpartition("/")
                    lag[(topic, pname)] = int(part["lag"])
        sink: Any = self.sink
        return Snapshot(
            consumed_messages=self.consumed_messages, consumed_bytes=self.consumed_bytes,
            acked_messages=self.tracker.acked_messages,
            redelivered=getattr(sink, "redelivered", 0),
            dead_lettered=getattr(sink, "dead_lettered", 0),
            rebalances=self.rebalances, session_losses=self.session_losses,
            partition_errors=self.partition_errors,
            commits=self.commits,
            commit_failures=self.commit_failures, sink_errors=sink.errors,
            sink_restarts=sink.restarts, owned_partitions=self._owned,
            inflight=sink.inflight(),
            zk_connected=self._zk_unreachable is None and self.state not in (
                "INIT", "SUSPENDED", "SESSION_LOST", "CLOSED"),
            healthy=self.health()[0], lag=lag, unregistered_topics=len(self.topics.missing))

    def health(self) -> tuple[bool, str]:
        """(healthy, reason) for ``/healthz``."""
        if self._zk_unreachable is not None:
            return False, f"not connected to ZooKeeper: {self._zk_unreachable}"
        if self._session_lost:
            return False, "ZooKeeper session lost"
        if self.state in ("INIT", "STARTING"):
            return True, "starting"
        if self.state == "CLOSED":
            return False, "closed"
        deaf = self._deafness.check(self._consumer, self.state == "SUSPENDED", self._clock(),
                                    self.config.health_idle_timeout)
        if deaf is not None:
            return False, deaf
        idle_since = self._idle_since
        if idle_since is not None:
            idle = self._clock() - idle_since
            if idle > self.config.health_idle_timeout:
                verdict = self._idle_verdict()
                if not verdict.healthy:
                    return False, f"owns no partition for {idle:.0f}s {verdict.reason}"
                return True, self.topics.annotate(verdict.reason)
        return True, self.topics.annotate("ok")

    def _idle_verdict(self) -> IdleVerdict:
        """`read_idle_verdict` of the group (cached a few seconds: /healthz may be hammered)."""
        now = self._clock()
        cached = self._idle_cache
        if cached is not None and now - cached[0] < min(5.0, self.config.health_idle_timeout):
            return cached[1]
        consumer = self._consumer
        verdict = (read_idle_verdict(consumer) if consumer is not None
                   else IdleVerdict(True, "ok"))
        self._idle_cache = (now, verdict)
        return verdict


def _stop_budget(timeout: float) -> tuple[float, float]:
    """How much of ``--shutdown-timeout`` is kept back from waiting for in-flight work:
    ``(for closing the sink, for the final commit and leaving the group)``.

    Both usually take milliseconds; the reserve only matters when they hang (an exec child
    that ignores SIGTERM, a ZooKeeper that does not answer).  A sink whose work finished
    early gets the unused waiting time too.
    """
    return min(2.0, 0.3 * timeout), min(1.0, 0.2 * timeout)


class _Listener:
    """Forwards the consumer's callbacks to the daemon (coordinator thread)."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def on_revoked(self, partitions: dict[str, list[str]]) -> None:
        self._daemon._revoked(partitions)

    def on_assigned(self, partitions: dict[str, list[str]]) -> None:
        self._daemon._assigned(partitions)

    def on_state(self, state: str) -> None:
        self._daemon._state(state)
