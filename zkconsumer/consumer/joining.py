"""Joining a group at the start of a long-running command (``run``, ``mirror``), and leaving
it at once when stopped meanwhile.

`join_group` is the one start-up loop both commands use.  It keeps trying instead of exiting,
because exiting would only make a supervisor restart the process into the same wait (a crash
loop that adds load to a struggling ensemble):

* a ZooKeeper that does not answer yet: `zkconsumer.zk.startup.start_when_reachable` (backoff
  0.5 s doubling to 30 s with jitter, each attempt logged as ``event=zk_connect_retry``, the
  caller told through ``on_unreachable`` so its ``/healthz`` can say "not connected to
  ZooKeeper"), until ``--startup-timeout``;
* a failed first rebalance (`RebalanceFailedError`) -- usually a predecessor that was killed:
  its owner znodes live until its ZooKeeper session expires (``zk.sessiontimeout.ms``),
  possibly longer than ``rebalance.retries.max`` x ``rebalance.backoff.ms``.  Logged as
  ``event=start_retry``; a new member (a fresh ``GroupConsumer``, a new consumer id) joins
  after ``rebalance.backoff.ms``.

`StartGuard`: ``GroupConsumer.start`` can take long (a connection attempt, up to
``zk.connectiontimeout.ms``; a first rebalance backing off), exactly when an operator or a
supervisor sends SIGTERM.  The signal handler only sets the stop event (it must not block or
take locks); the guard's thread, waiting on that event, closes the starting member
(`GroupConsumer.close` is callable from another thread while ``start`` runs: the attempt is
abandoned, the registration vanishes, ``start`` raises).  Anything `Startable` the same way
is guarded the same way (the bridge's 0.7 target, whose first connection attempt is as
long).

Invariants: a member is either closed by the guard or handed back as started, never both;
no member starts after a stop -- `StartGuard.start` claims the member under the lock the guard
takes it under, and refuses to start one once stopped; every error other than "ZooKeeper not
answering" and "first rebalance failed" is raised at once (retrying cannot fix a setting).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from zkconsumer.backoff import Backoff
from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.errors import RebalanceFailedError, ZkConsumerError
from zkconsumer.zk.startup import start_when_reachable

__all__ = ["STARTUP_TIMEOUT_HELP", "StartGuard", "Startable", "join_group"]

log = logging.getLogger(__name__)

#: ``--help`` of ``--startup-timeout``, one text for every long-running command that joins.
STARTUP_TIMEOUT_HELP = ("at start, keep trying to reach ZooKeeper (with backoff, each attempt "
                        "logged, /healthz 503) for at most S seconds, then exit 1 "
                        "(default: no limit)")


class Startable(Protocol):
    """What a `StartGuard` starts: ``start`` may take long; ``close`` -- from another thread,
    while ``start`` runs -- abandons it (``start`` then raises)."""

    def start(self) -> object: ...
    def close(self, timeout: float) -> None: ...


class StartGuard:
    """See the module docstring.  ``budget()``: seconds left for a close after the stop;
    ``closing``: what the log says when a stop closes something still starting."""

    def __init__(self, stop: threading.Event, budget: Callable[[], float], *,
                 closing: str = "leaving the group while joining it") -> None:
        self._stop = stop
        self._budget = budget
        self._closing = closing
        self._lock = threading.Lock()
        self._starting: Startable | None = None
        self._thread = threading.Thread(target=self._close_on_stop, daemon=True,
                                        name="zkconsumer-stop")
        self._thread.start()

    def start(self, consumer: Startable) -> bool:
        """``consumer.start()``; False if a stop came first or closed it meanwhile (raises
        what ``start`` raised -- after a stop, because of the close)."""
        with self._lock:
            if self._stop.is_set():
                return False
            self._starting = consumer
        try:
            consumer.start()
        finally:
            with self._lock:
                ours = self._starting is consumer
                self._starting = None
        return ours

    def wait(self) -> None:
        """After a stop: wait until the guard's close is over (the process may exit next)."""
        if self._stop.is_set():
            self._thread.join(self._budget() + 1.0)

    def _close_on_stop(self) -> None:
        # Waits for the command's whole life; a stop after the start finds nothing to close
        # (the command's own shutdown closes the running member).
        self._stop.wait()
        with self._lock:
            consumer, self._starting = self._starting, None
        if consumer is not None:
            log.info("stopping: %s", self._closing, extra={"event": "stopping"})
            consumer.close(timeout=max(0.05, self._budget()))


def join_group(make: Callable[[], GroupConsumer], guard: StartGuard, stop: threading.Event, *,
               rebalance_backoff_ms: int, startup_timeout: float | None,
               on_unreachable: Callable[[str | None], None] | None = None,
               give_up: Callable[[], bool] | None = None) -> GroupConsumer | None:
    """A started member made by ``make()`` (a fresh one per attempt); None once ``stop`` is
    set (or ``give_up()`` holds) before one started.  See the module docstring.

    ``on_unreachable(reason)`` after each attempt ZooKeeper did not answer, and
    ``on_unreachable(None)`` once it answered.  Raises `ZooKeeperUnreachableError` past
    ``startup_timeout`` seconds, and every error retrying cannot cure at once.
    """
    backoff = max(rebalance_backoff_ms / 1000.0, 0.1)
    reachable = Backoff(0.5, 30.0, jitter=0.5, sleep=stop.wait, timeout=startup_timeout)

    def attempt() -> GroupConsumer | None:
        consumer = make()
        return consumer if guard.start(consumer) else None

    def unreachable(exc: ZkConsumerError) -> None:
        if on_unreachable is not None:
            on_unreachable(str(exc))

    while not stop.is_set() and not (give_up is not None and give_up()):
        try:
            consumer = start_when_reachable(attempt, reachable, on_retry=unreachable)
            if on_unreachable is not None:
                on_unreachable(None)
            return consumer
        except ZkConsumerError as exc:
            if stop.is_set():  # the stop closed the member while it was starting
                log.info("stopped while joining the group (%s)", exc)
                return None
            if not isinstance(exc, RebalanceFailedError):
                raise
            if on_unreachable is not None:
                on_unreachable(None)
            log.warning("could not join the group yet: %s; retrying in %.1fs (owners left "
                        "by a killed member vanish when its ZooKeeper session expires)",
                        exc, backoff, extra={"event": "start_retry"})
        stop.wait(backoff)
    return None
