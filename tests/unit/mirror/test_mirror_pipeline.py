"""The bridge's writer hand-off (mirror/pipeline.py): order, no round after a failed one."""

from __future__ import annotations

import threading

import pytest

from zkconsumer.mirror.pipeline import Pipeline
from zkconsumer.mirror.runtime import Stopped


def test_rounds_are_written_in_order_and_idle_waits_for_them() -> None:
    written: list[int] = []
    gate = threading.Event()

    def write(n: int) -> None:
        gate.wait(5)
        written.append(n)

    pipe = Pipeline(write, lambda exc: None)
    pipe.submit(1)
    pipe.submit(2)  # taken once the writer holds round 1
    gate.set()
    pipe.submit(3)
    pipe.idle()
    assert written == [1, 2, 3]
    pipe.close()


def test_no_round_is_written_after_a_failed_one() -> None:
    written: list[int] = []
    failures: list[BaseException] = []

    def write(n: int) -> None:
        if n == 2:
            raise ValueError("target refused")
        written.append(n)

    pipe = Pipeline(write, failures.append)
    pipe.submit(1)
    pipe.submit(2)
    pipe.idle()
    assert pipe.broken and [str(e) for e in failures] == ["target refused"]
    with pytest.raises(Stopped):
        pipe.submit(3)
    pipe.close()
    assert written == [1]


def test_a_stop_while_writing_is_not_reported_as_a_failure() -> None:
    failures: list[BaseException] = []

    def write(_n: int) -> None:
        raise Stopped("stopped while writing")

    pipe = Pipeline(write, failures.append)
    pipe.submit(1)
    pipe.idle()
    assert pipe.broken and failures == []
    pipe.close()


def test_rounds_submitted_while_the_writer_is_busy_merge_up_to_the_bound() -> None:
    """A busy writer gets bigger rounds: what waits absorbs later submits (in order) while
    ``merge`` accepts, and a submit it refuses waits for the hand-off as before."""
    written: list[list[int]] = []
    started, gate = threading.Event(), threading.Event()

    def write(r: list[int]) -> None:
        started.set()
        gate.wait(5)
        written.append(r)

    def merge(queued: list[int], later: list[int]) -> list[int] | None:
        return queued + later if len(queued) + len(later) <= 3 else None

    pipe: Pipeline[list[int]] = Pipeline(write, lambda exc: None, merge=merge)
    pipe.submit([1])
    assert started.wait(5)  # the writer holds [1]: later rounds wait, and merge
    pipe.submit([2])
    pipe.submit([3])
    pipe.submit([4])
    blocked = threading.Thread(target=pipe.submit, args=([5],))
    blocked.start()  # [2, 3, 4] is full: [5] waits for the hand-off
    blocked.join(0.2)
    assert blocked.is_alive()
    gate.set()
    blocked.join(5)
    pipe.idle()
    assert written == [[1], [2, 3, 4], [5]]
    pipe.close()
