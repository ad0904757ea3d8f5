"""The runtime every mirror direction shares (mirror/runtime.py): timers, retry, stop, fatal."""

from __future__ import annotations

import threading

import pytest

from zkconsumer.errors import ConfigurationError, MirrorError
from zkconsumer.mirror.config import MirrorConfig, TargetSpec
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.runtime import Every, Runtime, Stopped


def runtime() -> Runtime:
    config = MirrorConfig(target=TargetSpec.parse("kafka://h:1"), retry_backoff_ms=1,
                          retry_backoff_max_ms=2)
    return Runtime(config, MirrorStats(), "test")


def test_every_is_due_once_per_interval_on_the_injected_clock() -> None:
    now = [100.0]
    every = Every(2.0, lambda: now[0])
    assert not every.due()
    now[0] = 102.0
    assert every.due() and not every.due()
    now[0] = 103.9
    assert not every.due()
    assert every.due(104.0)


def test_retrying_retries_transient_errors_and_counts_them() -> None:
    rt = runtime()
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise OSError("down")
        return "up"

    assert rt.retrying("connecting", flaky) == "up"
    assert len(calls) == 3 and rt.stats.retries == 2 and rt.stats.healthy
    assert rt.backoff.attempts == 0  # reset by the success


def test_final_errors_are_raised_at_once() -> None:
    rt = runtime()

    def bad() -> None:
        raise ConfigurationError("no")

    with pytest.raises(ConfigurationError):
        rt.retrying("x", bad)
    with pytest.raises(OSError):
        rt.retrying("x", lambda: (_ for _ in ()).throw(OSError("y")), final=(OSError,))


def test_stop_ends_a_retry_loop_with_stopped() -> None:
    rt = runtime()
    seen = threading.Event()

    def never() -> None:
        seen.set()
        rt.stop()
        raise OSError("still down")

    with pytest.raises(Stopped):
        rt.retrying("waiting", never)
    assert seen.is_set() and rt.stopping


def test_the_first_fatal_error_wins_and_ends_retrying() -> None:
    rt = runtime()
    first = MirrorError("first")
    assert rt.fail(first) is first
    assert rt.fail(MirrorError("second")) is first
    with pytest.raises(MirrorError, match="first"):
        rt.retrying("x", lambda: (_ for _ in ()).throw(OSError("y")))


def test_a_fatal_error_of_another_thread_is_raised_after_a_clean_stop() -> None:
    from zkconsumer.mirror.runtime import RuntimeEngine

    class Engine(RuntimeEngine):
        def __init__(self) -> None:
            self.runtime = runtime()
            self.shut = False

        def _start(self) -> None:
            pass

        def _loop(self) -> None:  # e.g. a writer thread failed, and the loop saw it stop
            self.runtime.fail(MirrorError("the writer failed"))
            raise Stopped("the writer stopped")

        def _shutdown(self) -> None:
            self.shut = True

    engine = Engine()
    with pytest.raises(MirrorError, match="the writer failed"):
        engine.run()
    assert engine.shut
