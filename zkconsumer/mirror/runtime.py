"""What every mirror direction shares: stop, retry with backoff, fatal errors, timers, shutdown.

The three engines -- `zkconsumer.mirror.engine.Mirror` (0.7 -> any target, at-least-once),
`zkconsumer.mirror.exactly_once.ExactlyOnceMirror` (0.7 -> ``kafka://`` in transactions) and
`zkconsumer.mirror.bridge.Bridge` (modern Kafka -> 0.7) -- differ in how they write; how they
stop, wait for a target that is away, give up on what retrying cannot cure and close is the
same, and lives here once, so a fix lands once:

* **Stop** (`stop`, from a signal handler or another thread) sets one event; every wait of the
  runtime (backoff, retry loops) ends on it, and `Stopped` unwinds a retry loop cleanly.
* **Retry** (`retrying`, `backoff_wait`): one `zkconsumer.backoff.Backoff` per engine
  (``mirror.retry.backoff.ms`` doubling up to ``mirror.retry.backoff.max.ms``, 10 % jitter),
  reset by every success (`succeeded`).  While retrying, ``stats.healthy`` is False (so
  ``/healthz`` is 503) and ``stats.retries`` counts the rounds.  `ZkConsumerError`s are final
  (configuration, a missing target topic): retrying cannot cure them.
* **Fatal** (`fail`): the first fatal error of any thread is kept and raised by the loop
  (`check`), after which shutdown commits what is safe.
* **Start** (`Runtime.join`, `Runtime.reach_zookeeper`): the 0.7 source group is joined by
  `zkconsumer.consumer.joining.join_group` -- the same loop as ``zkconsumer run``: a ZooKeeper
  that does not answer yet is retried (each attempt logged, ``/healthz`` 503 "not connected to
  ZooKeeper") until ``--startup-timeout``, a first rebalance blocked by a killed member's owners
  is retried with a fresh member, and a stop meanwhile ends the start at once (`Stopped`).
* **Timers** (`Every`): the loop's periodic duties (commit, progress) on the injected clock.
* **Close** (`close_all`): run every closer, none masking the real outcome.

Invariants: `fail` keeps the first error only; `retrying` never returns after `stop`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from zkconsumer.backoff import Backoff
from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.joining import Startable, StartGuard, join_group
from zkconsumer.errors import (
    MirrorError,
    ZkConsumerError,
    ZnodeDataError,
    ZooKeeperAuthError,
    ZooKeeperError,
    ZooKeeperUnreachableError,
)
from zkconsumer.mirror.config import MirrorConfig
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.zk.paths import BridgeCheckpoint
from zkconsumer.zk.startup import start_when_reachable

__all__ = ["Every", "Runtime", "RuntimeEngine", "SourceGroupEngine", "SourceView", "Stopped",
           "close_all"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class SourceView(Protocol):
    """The source cluster beyond what this member owns (`zkconsumer.mirror.runner`)."""

    def partitions(self, topic: str) -> list[str]: ...
    def log_ends(self, names: list[str], max_age: float = 2.0) -> dict[str, int]: ...
    def bridged_partitions(self, topic: str) -> list[str]: ...
    def bridge_checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]: ...


class Stopped(MirrorError):
    """`Runtime.stop` was called while waiting for the target: a clean stop, not an error."""


class Every:
    """A periodic duty on an injected clock: `due` is True once per ``interval`` seconds."""

    __slots__ = ("_clock", "_next", "interval")

    def __init__(self, interval: float, clock: Callable[[], float]) -> None:
        self.interval = interval
        self._clock = clock
        self._next = clock() + interval

    def due(self, now: float | None = None) -> bool:
        now = self._clock() if now is None else now
        if now < self._next:
            return False
        self._next = now + self.interval
        return True


def close_all(closers: Iterable[Callable[[], None]]) -> None:
    """Call every closer; a failing one is logged, never raised (closing must not mask the
    real outcome of a run)."""
    for close in closers:
        try:
            close()
        except Exception as exc:
            log.debug("mirror cleanup: %r", exc)


class Runtime:
    """Stop / retry / backoff / fatal of one engine (see the module docstring)."""

    def __init__(self, config: MirrorConfig, stats: MirrorStats, description: str, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.stats = stats
        self.description = description
        self.clock = clock
        self._stop = threading.Event()
        self._fatal: BaseException | None = None
        self.backoff = Backoff(config.retry_backoff_ms / 1000.0,
                               config.retry_backoff_max_ms / 1000.0, jitter=0.1,
                               clock=clock, sleep=self._stop.wait)

    # -- stop and fatal -----------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if `stop` was called meanwhile."""
        return self._stop.wait(seconds)

    def fail(self, exc: BaseException) -> BaseException:
        """Record a fatal error (the first one wins) and return the one recorded."""
        if self._fatal is None:
            self._fatal = exc
        return self._fatal

    @property
    def fatal(self) -> BaseException | None:
        return self._fatal

    def check(self) -> None:
        """Raise the recorded fatal error, if any (the loop calls this every turn)."""
        if self._fatal is not None:
            raise self._fatal

    # -- start --------------------------------------------------------------------------------

    def join(self, make: Callable[[], GroupConsumer], rebalance_backoff_ms: int
             ) -> GroupConsumer:
        """A started member of the source group, made by ``make()`` (a fresh one per attempt):
        see the module docstring; `Stopped` if stopped first, `ZooKeeperUnreachableError`
        past ``--startup-timeout``."""
        guard = StartGuard(self._stop, lambda: self.config.shutdown_timeout_ms / 1000.0)
        consumer = join_group(make, guard, self._stop, rebalance_backoff_ms=rebalance_backoff_ms,
                              startup_timeout=self.config.startup_timeout,
                              on_unreachable=self._unreachable)
        if consumer is None:
            guard.wait()  # its close of a member still starting is over: the process may exit
            raise Stopped("stopped while joining the source group")
        return consumer

    def reach_zookeeper(self, what: str, target: Startable) -> None:
        """``target.start()`` (which connects a ZooKeeper session) until ZooKeeper answers,
        as `join` does (`start_when_reachable`); `Stopped` if stopped meanwhile -- also
        during an attempt: a `StartGuard` closes ``target`` then, so a stop does not wait
        for ``zk.connectiontimeout.ms``."""
        backoff = Backoff(0.5, 30.0, jitter=0.5, sleep=self._stop.wait,
                          timeout=self.config.startup_timeout)
        guard = StartGuard(self._stop, lambda: self.config.shutdown_timeout_ms / 1000.0,
                           closing=f"abandoning {what}")
        try:
            done = start_when_reachable(lambda: guard.start(target), backoff,
                                        on_retry=self._unreachable)
        except ZkConsumerError:
            if self.stopping:  # the guard's close ended the attempt
                guard.wait()
                raise Stopped(f"stopped while {what}") from None
            raise
        self._unreachable(None)
        if not done:
            guard.wait()
            raise Stopped(f"stopped while {what}")

    def _unreachable(self, reason: ZooKeeperUnreachableError | str | None) -> None:
        self.stats.zk_unreachable = None if reason is None else str(reason)

    # -- retry --------------------------------------------------------------------------------

    def succeeded(self) -> None:
        """A target operation worked: the next failure backs off from the start again."""
        if self.backoff.attempts:
            self.backoff.reset()
        self.stats.healthy = True

    def backoff_wait(self, what: str, exc: BaseException | None) -> None:
        """Count a failed round, log it, wait the backoff; `Stopped` if stopped meanwhile."""
        self.stats.healthy = False
        self.stats.add("retries")
        delay = self.backoff.next_delay()
        log.warning("%s on %s failed (%r); retrying in %.1fs (nothing is skipped, nothing "
                    "is acknowledged past it)", what, self.description, exc, delay)
        if self._stop.wait(delay):
            raise Stopped(f"stopped while {what}") from exc

    def retrying(self, what: str, fn: Callable[[], T], *,
                 final: tuple[type[BaseException], ...] = (ZkConsumerError,),
                 retry_on: tuple[type[BaseException], ...] = (Exception,)) -> T:
        """``fn()`` until it succeeds, backing off between tries.  ``final`` errors (by
        default every `ZkConsumerError`: they name a condition retrying cannot cure) and
        errors outside ``retry_on`` are raised at once; `Stopped` after `stop`."""
        while True:
            if self._stop.is_set():
                raise Stopped(f"stopped while {what}")
            try:
                result = fn()
            except Stopped:
                raise
            except Exception as exc:
                if isinstance(exc, final) or not isinstance(exc, retry_on):
                    raise
                self.check()  # a fatal error recorded meanwhile ends the retrying
                self.backoff_wait(what, exc)
                continue
            self.succeeded()
            return result

    def zookeeper_read(self, what: str, fn: Callable[[], T]) -> T:
        """`retrying` for a ZooKeeper read the loop needs (the loop guard's bridge
        checkpoints): a lost connection or an expired session is waited out -- the session
        comes back, as the group member's does -- while garbage in a znode, refused
        credentials and every error that is not ZooKeeper's stay final.  Why: a mirror paused
        past its session timeout read its loop guard on the expired session and exited with
        "ZooKeeper session expired" (soak seed 76)."""
        return self.retrying(what, fn, final=(ZnodeDataError, ZooKeeperAuthError),
                             retry_on=(ZooKeeperError,))


class RuntimeEngine:
    """The control surface every engine shares: `stop`, `stopping`, and `run` as start ->
    loop -> shutdown, where a `Stopped` (stop while waiting for the target) is a clean end
    and shutdown always runs (it commits what is safe and closes)."""

    runtime: Runtime

    def stop(self) -> None:
        """Ask `run` to finish (safe from a signal handler or another thread)."""
        self.runtime.stop()

    @property
    def stopping(self) -> bool:
        return self.runtime.stopping

    def run(self) -> None:
        """Run until `stop`; raises a fatal error after shutting down cleanly."""
        try:
            self._start()
            self._loop()
        except Stopped:
            pass
        finally:
            try:
                self._shutdown()
            finally:
                self.runtime.stop()  # ends the start guard's thread (it waits for a stop)
        self.runtime.check()  # a fatal error another thread (a writer) recorded meanwhile

    def _start(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError


class SourceGroupEngine(RuntimeEngine):
    """A forward engine: it reads the 0.7 source as a member of a group (``consumer``).

    ``consumer`` is replaced by a fresh member (a new consumer id) when a start attempt
    failed (`Runtime.join`); `_listen` registers the engine's callbacks on each one.
    """

    consumer: GroupConsumer

    def _join_source(self) -> None:
        first = [self.consumer]

        def make() -> GroupConsumer:
            if first:
                return first.pop()
            old = self.consumer
            consumer = GroupConsumer(old.config, old.subscription)
            self._listen(consumer)
            self.consumer = consumer
            log.info("joining group %s again as %s", old.config.group_id, consumer.consumer_id,
                     extra={"event": "start", "consumer_id": consumer.consumer_id})
            return consumer

        self.consumer = self.runtime.join(make, self.consumer.config.rebalance_backoff_ms)

    def _listen(self, consumer: GroupConsumer) -> None:
        raise NotImplementedError
