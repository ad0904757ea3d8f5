"""The shared `Backoff`: exponential with a cap, jitter that only shortens, reset, deadline.

A fake clock whose sleep advances it stands in for time, so nothing here waits.
"""
from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.backoff import Backoff
from zkconsumer.errors import ConfigurationError


class FakeClock:
    """Monotonic time that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_doubles_up_to_the_cap_and_reset_starts_over() -> None:
    b = Backoff(0.1, 1.0)
    assert [b.next_delay() for _ in range(6)] == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0])
    assert b.attempts == 6
    b.reset()
    assert b.attempts == 0
    assert b.next_delay() == pytest.approx(0.1)


def test_delay_for_is_pure_and_survives_huge_attempt_numbers() -> None:
    b = Backoff(0.5, 30.0, factor=10.0)
    assert b.delay_for(0) == 0.0
    assert b.delay_for(1) == 0.5
    assert b.delay_for(2) == 5.0
    assert b.delay_for(10**9) == 30.0  # no OverflowError
    assert b.attempts == 0


def test_zero_initial_never_waits() -> None:
    b = Backoff(0.0, 0.0)
    assert [b.next_delay() for _ in range(3)] == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("kwargs", [
    {"initial": -1, "maximum": 1}, {"initial": 2, "maximum": 1},
    {"initial": 1, "maximum": float("inf")}, {"initial": 1, "maximum": 2, "factor": 0.5},
    {"initial": 1, "maximum": 2, "jitter": 1.5}, {"initial": 1, "maximum": 2, "timeout": -1},
])
def test_bad_arguments_are_configuration_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError, match="backoff"):
        Backoff(**kwargs)


def test_jitter_is_seeded_and_reproducible() -> None:
    a = Backoff(1.0, 60.0, jitter=0.5, rng=random.Random(7))
    b = Backoff(1.0, 60.0, jitter=0.5, rng=random.Random(7))
    assert [a.next_delay() for _ in range(8)] == [b.next_delay() for _ in range(8)]


@given(initial=st.floats(0.0, 10.0), span=st.floats(0.0, 100.0), factor=st.floats(1.0, 8.0),
       jitter=st.floats(0.0, 1.0), seed=st.integers(0, 2**32), n=st.integers(1, 80))
def test_delays_stay_within_jittered_bounds_and_cap(initial: float, span: float, factor: float,
                                                   jitter: float, seed: int, n: int) -> None:
    b = Backoff(initial, initial + span, factor=factor, jitter=jitter, rng=random.Random(seed))
    plain = Backoff(initial, initial + span, factor=factor)
    previous = 0.0
    for attempt in range(1, n + 1):
        undisturbed = plain.next_delay()
        assert undisturbed == b.delay_for(attempt)
        assert undisturbed >= previous  # non-decreasing without jitter
        previous = undisturbed
        d = b.next_delay()
        assert undisturbed * (1 - jitter) - 1e-9 <= d <= undisturbed <= initial + span
    assert b.attempts == n


def test_deadline_clips_the_last_wait_and_then_stops() -> None:
    clock = FakeClock()
    b = Backoff(1.0, 8.0, clock=clock, sleep=clock.sleep, timeout=5.0)
    tries = 1
    while b.wait():
        tries += 1
    # 1 + 2 = 3 s, then only 2 s of the 4 s delay remain: the last try is at the deadline.
    assert clock.slept == [1.0, 2.0, 2.0]
    assert clock.now == 105.0
    assert tries == 4
    assert b.expired() and b.remaining() == 0.0
    b.reset()
    assert b.expired()  # reset counts attempts, it does not move the deadline


def test_without_deadline_it_never_expires() -> None:
    clock = FakeClock()
    b = Backoff(1.0, 1.0, clock=clock, sleep=clock.sleep)
    for _ in range(1000):
        assert b.wait()
    assert not b.expired() and b.remaining() is None and b.deadline is None


def test_a_set_event_interrupts_the_wait() -> None:
    stop = threading.Event()
    stop.set()
    b = Backoff(60.0, 60.0, sleep=stop.wait)
    assert b.wait() is False  # returns at once: Event.wait returned True
    assert b.attempts == 1
