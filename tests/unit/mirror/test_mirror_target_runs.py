"""How `KafkaTarget.send_run` reports a run: exactly once, and failed if any message failed.

The producers are real librdkafka producers pointed at a port nothing listens on (as in
test_mirror_producer_pool.py): what librdkafka accepts, refuses at ``produce`` time and purges
on a reset is observable without a broker.  Delivery through a broker, and a full queue
draining into one, are tested against tansu in
tests/integration/mirror/test_mirror_alo_runs.py.
"""

from __future__ import annotations

import threading

import pytest
from fixtures.outcomes import Outcomes

from zkconsumer.errors import TargetError
from zkconsumer.mirror.targets import KafkaTarget, RunItem, _RunCountdown

NOWHERE = "127.0.0.1:9"  # discard port: nothing answers, nothing is delivered


def _run(partitions: list[int | None]) -> list[RunItem]:
    """Small messages, the third one over the client's limit (1000 bytes below)."""
    return [(b"x" * (5000 if i == 2 else 10), p, None) for i, p in enumerate(partitions)]


@pytest.mark.parametrize("partitions", [[0] * 6, [None] * 6, [0, 1, 0, 1, 0, 1]],
                         ids=["one-partition", "by-key", "spread"])
def test_a_refused_message_in_the_middle_fails_its_whole_run(
        partitions: list[int | None]) -> None:
    # one-partition and by-key runs take the produce_batch path, where librdkafka queues the
    # messages after the refused one anyway; spread runs are produced message by message and
    # stop there.  Either way the run must fail -- once -- so its offsets are never
    # acknowledged, whatever happens to the messages around the refused one.
    target = KafkaTarget([NOWHERE], {"message.max.bytes": "1000"})
    target.open()
    try:
        done = Outcomes()
        with pytest.raises(TargetError, match="5000-byte"):
            target.send_run("t", _run(partitions), done, stream="s")
        target.reset()  # purges whatever was queued: those reports arrive now
        assert done.wait(1, 10)
        ok = Outcomes()
        target.send_run("t", [(b"fine", partitions[0], None)], ok, stream="s")
        target.reset()
        assert ok.wait(1, 10)  # the next run reports on its own ...
        assert len(done.results) == 1 and done.results[0] is not None  # ... this one failed once
    finally:
        target.close(0)


def test_queued_runs_fail_once_each_when_purged() -> None:
    target = KafkaTarget([NOWHERE])
    target.open()
    try:
        done = Outcomes()
        for i in range(10):
            target.send_run("t", [(b"v%d" % j, i % 3, None) for j in range(50)], done,
                            stream=("t", i % 4))
        target.send_run("t", [], done, stream="empty")  # nothing to deliver: done at once
        assert done.results == [None]
        target.reset()
        assert done.wait(11, 10)
        assert len(done.results) == 11 and all(e is not None for e in done.results[1:])
    finally:
        target.close(0)


@pytest.mark.parametrize("failing", [0, 20000, 39999], ids=["first", "middle", "last"])
def test_the_countdown_reports_once_with_the_error_whatever_the_threads(failing: int) -> None:
    # delivery reports of one run arrive from several threads at once (a poll thread, a
    # purging reset, the mirror loop abandoning the rest): exactly one on_done, carrying the
    # error even when the failing report is not the last one
    n, threads = 40000, 4
    done = Outcomes()
    run = _RunCountdown(n, done, lambda _name, _text: False)
    start = threading.Barrier(threads)

    def report(k: int) -> None:
        start.wait()
        for i in range(k, n, threads):
            if i == failing:
                run.abandon(1, RuntimeError("refused"))
            else:
                run.delivered(None, None)

    workers = [threading.Thread(target=report, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert len(done.results) == 1
    assert isinstance(done.results[0], RuntimeError)
