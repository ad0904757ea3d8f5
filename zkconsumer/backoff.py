"""One exponential backoff for every retry loop in the package.

A `Backoff` counts consecutive failures and answers "how long until the next try":
``initial * factor ** (attempt - 1)``, capped at ``maximum``, optionally shortened by a random
*jitter* fraction so that many processes that failed together (64 members started in bulk, a
broker that came back) do not retry in lock-step.  A success calls `reset`.  An optional
*deadline* (``timeout`` seconds after construction, on the injected clock) bounds the whole
retrying: no wait reaches past it, and `expired` says when the caller should give up.

Invariants:

* ``0 <= next_delay() <= maximum``; without jitter the delays are non-decreasing between two
  resets; with jitter ``j`` each delay lies in ``[d * (1 - j), d]`` where ``d`` is the
  un-jittered delay -- jitter only ever shortens, so the cap holds.
* ``attempts`` is the number of `next_delay` calls since construction or the last `reset`.
* With a deadline, `next_delay` never returns more than the time left (never negative).
* Clock, sleep and randomness are injected, so tests run without real waiting.

This is a leaf module: it imports nothing of ours but `zkconsumer.errors`, so ``client/`` and
``zk/`` can use it.  It is not thread-safe: one retry loop owns one `Backoff`.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Callable

from zkconsumer.errors import ConfigurationError

__all__ = ["Backoff"]


class Backoff:
    """Exponential backoff with a cap, optional jitter and an optional deadline.

    ``sleep`` is called with a delay in seconds; if it returns a truthy value the wait counts
    as *interrupted* (``threading.Event.wait`` returns True once the event is set, so passing
    ``stop_event.wait`` makes `wait` end early on shutdown; ``time.sleep`` returns None).

    Example::

        backoff = Backoff(0.1, 10.0, jitter=0.2, sleep=stop.wait)
        while True:
            try:
                connect()
                backoff.reset()
                break
            except OSError:
                if not backoff.wait():      # interrupted or out of time
                    raise
    """

    __slots__ = ("_attempts", "_clock", "_deadline", "_exp_cap", "_rng", "_sleep", "factor",
                 "initial", "jitter", "maximum")

    def __init__(self, initial: float, maximum: float, *, factor: float = 2.0,
                 jitter: float = 0.0, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], object] = time.sleep,
                 timeout: float | None = None) -> None:
        if not (math.isfinite(initial) and math.isfinite(maximum)) \
                or initial < 0 or maximum < initial:
            raise ConfigurationError(
                f"backoff: need 0 <= initial <= maximum, got initial={initial} maximum={maximum}")
        if not (math.isfinite(factor) and factor >= 1.0):
            raise ConfigurationError(f"backoff: factor must be >= 1, got {factor}")
        if not 0.0 <= jitter <= 1.0:
            raise ConfigurationError(f"backoff: jitter must be within [0, 1], got {jitter}")
        if timeout is not None and not timeout >= 0:
            raise ConfigurationError(f"backoff: timeout must be >= 0, got {timeout}")
        self.initial = initial
        self.maximum = maximum
        self.factor = factor
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()
        self._clock = clock
        self._sleep = sleep
        self._deadline = None if timeout is None else clock() + timeout
        self._attempts = 0
        # The exponent past which the cap is reached: keeps factor ** n from overflowing.
        if initial > 0 and factor > 1.0 and maximum > initial:
            self._exp_cap = math.ceil(math.log(maximum / initial, factor)) + 1
        else:
            self._exp_cap = 0

    @property
    def attempts(self) -> int:
        """Failures counted (`next_delay` calls) since construction or the last `reset`."""
        return self._attempts

    @property
    def deadline(self) -> float | None:
        """The clock reading after which retrying stops, or None (no limit)."""
        return self._deadline

    def delay_for(self, attempt: int) -> float:
        """The un-jittered delay after failure number ``attempt`` (1-based), capped; pure."""
        if attempt < 1:
            return 0.0
        return min(self.initial * self.factor ** min(attempt - 1, self._exp_cap), self.maximum)

    def next_delay(self) -> float:
        """Count one failure and return how long to wait before the next try (jittered,
        never beyond the deadline)."""
        self._attempts += 1
        delay = self.delay_for(self._attempts)
        if self.jitter:
            delay *= 1.0 - self.jitter * self._rng.random()
        remaining = self.remaining()
        return delay if remaining is None else min(delay, remaining)

    def reset(self) -> None:
        """A success: the next failure waits ``initial`` again.  The deadline is kept."""
        self._attempts = 0

    def remaining(self) -> float | None:
        """Seconds left before the deadline (>= 0), or None without a deadline."""
        if self._deadline is None:
            return None
        return max(self._deadline - self._clock(), 0.0)

    def expired(self) -> bool:
        """True once the deadline has passed (never without a deadline)."""
        return self._deadline is not None and self._clock() >= self._deadline

    def sleep(self, seconds: float) -> bool:
        """Sleep ``seconds`` with the injected sleep.  True: not interrupted."""
        return not self._sleep(seconds)

    def wait(self) -> bool:
        """Count one failure and sleep its delay.  True: try again.  False: the deadline had
        already passed or the sleep was interrupted -- stop retrying.

        A wait never reaches past the deadline, and the try right after it (at the deadline)
        is still allowed: the *next* `wait` returns False.
        """
        if self.expired():
            self._attempts += 1
            return False
        return self.sleep(self.next_delay())
