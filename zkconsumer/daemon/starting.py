"""`StartGuard`: a stop of ``zkconsumer run`` ends a member that is still starting, at once.

``GroupConsumer.start`` can take long: the ZooKeeper connection attempt (up to
``zk.connectiontimeout.ms``), then the first rebalance, which backs off while a killed
predecessor's owner znodes live on (up to ``rebalance.retries.max`` x
``rebalance.backoff.ms``) -- the usual situation after a crash-restart, and exactly when an
operator or a supervisor sends SIGTERM.  The signal handler only sets the daemon's stop event
(it must not block or take locks); the guard's thread, waiting on that event, closes the
starting member (`GroupConsumer.close` is callable from another thread while ``start``
runs: the attempt is abandoned, the registration vanishes, ``start`` raises).

Invariant: a member is either closed by the guard or handed back to the daemon as started,
never both, and no member starts after a stop -- `start` claims the member under the lock
the guard takes it under, and refuses to start one once stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from zkconsumer.consumer import GroupConsumer

__all__ = ["StartGuard"]

log = logging.getLogger(__name__)


class StartGuard:
    """See the module docstring.  ``budget()``: seconds left for a close after the stop."""

    def __init__(self, stop: threading.Event, budget: Callable[[], float]) -> None:
        self._stop = stop
        self._budget = budget
        self._lock = threading.Lock()
        self._starting: GroupConsumer | None = None
        self._thread = threading.Thread(target=self._close_on_stop, daemon=True,
                                        name="zkconsumer-stop")
        self._thread.start()

    def start(self, consumer: GroupConsumer) -> bool:
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
        # Waits for the daemon's whole life; a stop after the start finds nothing to close
        # (the daemon's own shutdown closes the running member).
        self._stop.wait()
        with self._lock:
            consumer, self._starting = self._starting, None
        if consumer is not None:
            log.info("stopping: leaving the group while joining it",
                     extra={"event": "stopping"})
            consumer.close(timeout=max(0.05, self._budget()))
