"""HandlerSink: per-partition batches, retries with backoff, dead letter, abandon."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from daemon_unit_helpers import make_messages
from fixtures.waiting import wait_until

from zkconsumer.daemon.sinks.deadletter import DeadLetterFile
from zkconsumer.daemon.sinks.handler import HandlerSink, load_handler
from zkconsumer.daemon.tracker import AckTracker
from zkconsumer.errors import ConfigurationError


class Recorder:
    """A handler that records its calls and fails on the partitions/times it is told to."""

    def __init__(self, fail: dict[int, int] | None = None) -> None:
        self.calls: list[tuple[int, list[bytes]]] = []
        self.fail = dict(fail or {})  # partition -> failures still to raise (-1 = forever)
        self.lock = threading.Lock()

    def __call__(self, batch: list[Any]) -> None:
        pid = batch[0].partition_id
        assert all(m.partition_id == pid for m in batch)
        with self.lock:
            self.calls.append((pid, [m.value for m in batch]))
            left = self.fail.get(pid, 0)
            if left:
                self.fail[pid] = left - 1 if left > 0 else left
                raise RuntimeError(f"boom on partition {pid}")


def _sink(handler: Recorder, **kw: Any) -> HandlerSink:
    kw.setdefault("retry_backoff", 0.01)
    kw.setdefault("retry_backoff_max", 0.05)
    sink = HandlerSink(AckTracker(), handler, **kw)
    sink.start()
    return sink


def test_batches_are_per_partition_and_acknowledged() -> None:
    rec = Recorder()
    sink = _sink(rec, batch_size=4)
    try:
        a = make_messages(10, partition=0)
        b = make_messages(3, partition=1)
        sink.submit(a[:5] + b + a[5:])
        wait_until(lambda: sink.tracker.acked_messages == 13, what="13 acks")
        got0 = [v for pid, vs in rec.calls if pid == 0 for v in vs]
        assert got0 == [m.value for m in a]  # in order, nothing twice
        assert max(len(vs) for _, vs in rec.calls) <= 4
        assert sink.inflight() == 0
        assert sorted(sink.tracker.take(), key=lambda m: m.partition_id) == [a[-1], b[-1]]
    finally:
        sink.close(2.0)


def test_failure_retries_same_batch_and_blocks_only_its_partition() -> None:
    rec = Recorder(fail={0: 3})
    sink = _sink(rec, batch_size=100, max_retries=10)
    try:
        a = make_messages(5, partition=0)
        b = make_messages(5, partition=1)
        sink.submit(a + b)
        wait_until(lambda: sink.tracker.acked_messages == 10, what="acks after retries")
        p0 = [vs for pid, vs in rec.calls if pid == 0]
        assert p0 == [[m.value for m in a]] * 4  # 3 failures + 1 success, same batch
        assert sink.errors == 3
        # partition 1 was not held up by partition 0's failures
        assert rec.calls.index((1, [m.value for m in b])) < len(rec.calls) - 1
    finally:
        sink.close(2.0)


def test_offset_does_not_advance_while_failing_without_dead_letter() -> None:
    rec = Recorder(fail={0: -1})
    sink = _sink(rec, max_retries=1)
    try:
        sink.submit(make_messages(3))
        wait_until(lambda: len(rec.calls) >= 4, what="several retries")
        assert sink.tracker.acked_messages == 0
        assert sink.tracker.take() == []
        assert sink.inflight() == 3
        assert sink.dead_lettered == 0
    finally:
        sink.close(2.0)


def test_dead_letter_after_max_retries(tmp_path: Path) -> None:
    rec = Recorder(fail={0: -1})
    dl = tmp_path / "dead.jsonl"
    sink = _sink(rec, max_retries=2, dead_letter=DeadLetterFile(str(dl)))
    try:
        batch = make_messages(3, start=500)
        sink.submit(batch)
        wait_until(lambda: sink.tracker.acked_messages == 3, what="dead-lettered batch acked")
        assert len(rec.calls) == 3  # first call + 2 retries
        records = [json.loads(line) for line in dl.read_text().splitlines()]
        assert [base64.b64decode(r["value_base64"]) for r in records] == [m.value for m in batch]
        assert records[0]["offset"] == 500 and records[0]["partition"] == "0-0"
        assert records[0]["attempts"] == 3 and "boom" in records[0]["error"]
        assert sink.dead_lettered == 3
        assert sink.tracker.take() == [batch[-1]]
    finally:
        sink.close(2.0)


def test_dead_letter_follows_the_last_failed_retry_at_once(tmp_path: Path) -> None:
    # issue 22 item 12: the dead letter waited one more (doubled) backoff -- 16 s with the
    # defaults -- after the last documented retry had failed.  The clock never moves here, so
    # any backoff before the dead letter would hold it forever.
    rec = Recorder(fail={0: -1})
    sink = _sink(rec, max_retries=0, retry_backoff=60.0, retry_backoff_max=60.0,
                 dead_letter=DeadLetterFile(str(tmp_path / "dead.jsonl")), clock=lambda: 0.0)
    try:
        sink.submit(make_messages(3))
        wait_until(lambda: sink.dead_lettered == 3, what="dead letter without a backoff")
        assert len(rec.calls) == 1
    finally:
        sink.close(2.0)


def test_handler_errors_count_calls_out_of_one_plus_max_retries(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(fail={0: -1})
    sink = _sink(rec, max_retries=2, dead_letter=DeadLetterFile(str(tmp_path / "dead.jsonl")))
    with caplog.at_level("ERROR", logger="zkconsumer.daemon.sinks.handler"):
        try:
            sink.submit(make_messages(3))
            wait_until(lambda: sink.dead_lettered == 3, what="dead-lettered batch")
        finally:
            sink.close(2.0)
    failed = [r.getMessage() for r in caplog.records if getattr(r, "event", "") == "handler_error"]
    assert [m.split("(attempt ")[1].split(")")[0] for m in failed] == ["1/3", "2/3", "3/3"]
    assert failed[0].endswith("retrying in 0.0s") and failed[-1].endswith("dead-lettering now")


def test_dead_letter_failure_keeps_batch_unacknowledged(tmp_path: Path) -> None:
    rec = Recorder(fail={0: -1})
    dl = tmp_path / "missing-dir" / "dead.jsonl"
    sink = _sink(rec, max_retries=0, dead_letter=DeadLetterFile(str(dl)))
    try:
        sink.submit(make_messages(2))
        wait_until(lambda: sink.errors >= 3, what="dead letter attempts")
        assert sink.tracker.acked_messages == 0
    finally:
        sink.close(2.0)


def test_abandon_drops_queue_and_running_result() -> None:
    started = threading.Event()
    release = threading.Event()
    seen: list[int] = []

    def slow(batch: list[Any]) -> None:
        seen.append(len(batch))
        started.set()
        release.wait(5)

    sink = HandlerSink(AckTracker(), slow, batch_size=2)
    sink.start()
    try:
        sink.submit(make_messages(6))
        assert started.wait(5)
        assert sink.drain(0.05) is False  # the handler is still running
        sink.tracker.revoke([("t", 0, 0)])
        sink.abandon({("t", 0, 0)})
        assert sink.inflight() == 0
        release.set()
        assert sink.drain(5.0)
        assert sink.tracker.acked_messages == 0 and seen == [2]
    finally:
        release.set()
        sink.close(2.0)


def test_load_handler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "myhandlers_mod.py").write_text(
        "class H:\n    @staticmethod\n    def handle(batch):\n        return len(batch)\n"
        "value = 3\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    fn = load_handler("myhandlers_mod:H.handle")
    assert fn([1, 2]) == 2
    for bad, text in (("nocolon", "module:function"), ("no_such_mod_xyz:f", "cannot import"),
                      ("myhandlers_mod:missing", "no attribute"),
                      ("myhandlers_mod:value", "not callable")):
        with pytest.raises(ConfigurationError, match=text):
            load_handler(bad)


def test_batch_polled_before_a_rebalance_skips_revoked_partitions() -> None:
    rec = Recorder()
    sink = _sink(rec)
    try:
        a = make_messages(3, partition=0)
        b = make_messages(2, partition=1)
        sink.tracker.revoke([("t", 0, 0)])
        sink.abandon({("t", 0, 0)})
        sink.submit(a + b)
        assert sink.inflight() == 2
        wait_until(lambda: sink.tracker.acked_messages == 2, what="2 acks")
        assert sink.drain(5.0)
        assert [pid for pid, _ in rec.calls] == [1]
        assert sink.tracker.take() == [b[-1]]
        assert sink.inflight() == 0
    finally:
        sink.close(2.0)
