"""FileSink: append-only batch writes, acknowledgement, fsync, reopen after logrotate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from daemon_unit_helpers import make_messages

from zkconsumer.consumer import Columns
from zkconsumer.consumer.message import PartitionState
from zkconsumer.daemon.sinks.file import FileSink
from zkconsumer.daemon.tracker import AckTracker
from zkconsumer.errors import SinkError
from zkconsumer.protocol import encode_message_set
from zkconsumer.protocol.batch import decode_batch


def test_writes_and_acknowledges(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    sink = FileSink(AckTracker(), str(out), "jsonl")
    sink.start()
    batch = make_messages(5)
    sink.submit(batch)
    sink.sync()
    assert [json.loads(line)["value"] for line in out.read_text().splitlines()] == [
        "m0", "m1", "m2", "m3", "m4"]
    assert sink.tracker.acked_messages == 5
    assert sink.tracker.take() == [batch[-1]]
    sink.close(1.0)


def test_appends_never_truncates(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_bytes(b"earlier\n")
    sink = FileSink(AckTracker(), str(out), "lines")
    sink.start()
    sink.submit(make_messages(2))
    sink.close(1.0)
    assert out.read_bytes() == b"earlier\nm0\nm1\n"


def test_reopen_after_rotation(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    sink = FileSink(AckTracker(), str(out), "lines")
    sink.start()
    sink.submit(make_messages(2, prefix="old"))
    out.rename(tmp_path / "out.txt.1")  # logrotate moves the file ...
    sink.submit(make_messages(1, prefix="late"))  # (still goes to the moved file)
    sink.reopen()  # ... then signals
    sink.submit(make_messages(2, prefix="new"))
    sink.close(1.0)
    assert (tmp_path / "out.txt.1").read_bytes() == b"old0\nold1\nlate0\n"
    assert out.read_bytes() == b"new0\nnew1\n"


def test_unwritable_path_is_a_sink_error(tmp_path: Path) -> None:
    sink = FileSink(AckTracker(), str(tmp_path / "no" / "such" / "dir.txt"))
    with pytest.raises(SinkError, match="cannot open output file"):
        sink.start()


def test_stdout(tmp_path: Path) -> None:
    code = ("from zkconsumer.daemon.sinks.file import FileSink\n"
            "from zkconsumer.daemon.tracker import AckTracker\n"
            "from zkconsumer.consumer.message import Message\n"
            "s = FileSink(AckTracker(), '-', 'raw'); s.start()\n"
            "s.submit([Message('t', 0, 0, 0, 1, b'ab'), Message('t', 0, 0, 1, 2, b'cd')])\n"
            "s.sync()\n"
            "import os; os._exit(0)  # no interpreter flush: sync() must have written it\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                         cwd=Path(__file__).parents[3], timeout=30)
    assert out.stdout == b"abcd"


def test_torn_last_record_is_cut_at_open(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"value":"a"}\n{"value":"b"}\n{"val')  # kill -9 inside a write
    sink = FileSink(AckTracker(), str(out), "jsonl")
    sink.start()
    sink.submit(make_messages(1))
    sink.close(1.0)
    lines = out.read_bytes().splitlines()
    assert lines[:2] == [b'{"value":"a"}', b'{"value":"b"}']
    assert json.loads(lines[2])["value"] == "m0" and len(lines) == 3


def test_torn_tail_without_any_newline_and_raw_untouched(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_bytes(b"x" * 70000)
    sink = FileSink(AckTracker(), str(out), "lines")
    sink.start()
    sink.close(1.0)
    assert out.read_bytes() == b""
    raw = tmp_path / "out.raw"
    raw.write_bytes(b"abc")
    sink = FileSink(AckTracker(), str(raw), "raw")
    sink.start()
    sink.close(1.0)
    assert raw.read_bytes() == b"abc"  # no record boundaries to repair


def test_batch_polled_before_a_rebalance_skips_revoked_partitions(tmp_path: Path) -> None:
    # A batch polled before a rebalance and submitted after it: the revoked partition's
    # messages were abandoned; written and acknowledged now they would be committed under the
    # new generation past messages that were never delivered.
    out = tmp_path / "out.txt"
    tracker = AckTracker()
    sink = FileSink(tracker, str(out), "lines")
    sink.start()
    a = make_messages(3, partition=0, prefix="a")
    b = make_messages(2, partition=1, prefix="b")
    x = make_messages(1, partition=0, prefix="x")
    tracker.revoke([("t", 0, 0)])
    sink.submit(a + b)
    sink.submit(x)  # all revoked: no-op
    sink.close(1.0)
    assert out.read_bytes() == b"b0\nb1\n"
    assert tracker.take() == [b[-1]]


def test_messages_of_a_new_claim_of_a_revoked_partition_are_written(tmp_path: Path) -> None:
    # Issue 11, Defect 1: the member releases a partition and claims it back a few ms later
    # (a session expiry of a lone member; a join with several streams).  The first batch of
    # the new claim may be polled in the same loop iteration as the revocation ran; the
    # consumer's position is already past it, so dropping it would lose it for good.
    out = tmp_path / "out.txt"
    tracker = AckTracker()
    sink = FileSink(tracker, str(out), "lines")
    sink.start()
    old = make_messages(2, partition=0, prefix="old")
    tracker.revoke([("t", 0, 0)])
    new = make_messages(3, partition=0, prefix="new")  # the new claim, same partition
    sink.submit(old + new)
    sink.close(1.0)
    assert out.read_bytes() == b"new0\nnew1\nnew2\n"
    assert tracker.take() == [new[-1]]


def test_full_disk_raises_and_acknowledges_nothing(tmp_path: Path) -> None:
    # /dev/full fails every write with ENOSPC: the batch must stay unacknowledged (the
    # daemon stops and the batch is re-read), never be skipped.
    tracker = AckTracker()
    sink = FileSink(tracker, "/dev/full", "lines")
    sink.start()
    with pytest.raises(SinkError, match="No space left"):
        sink.submit(make_messages(3))
    assert tracker.acked_messages == 0
    assert tracker.take() == []
    assert sink.errors == 1
    sink.close(1.0)


def test_output_to_a_device_is_not_fsynced(tmp_path: Path) -> None:
    # fsync(/dev/null) fails EINVAL: that must not stop a daemon writing to a device.
    tracker = AckTracker()
    sink = FileSink(tracker, "/dev/null", "lines")
    sink.start()
    sink.submit(make_messages(2))
    sink.sync()
    sink.reopen()
    sink.close(1.0)
    assert tracker.acked_messages == 2


def _columns(partition: int, values: list[bytes]) -> tuple[Columns, PartitionState]:
    state = PartitionState("t", 0, partition, "t-thread-0", 0, 0, 1024)
    batch = decode_batch(encode_message_set(values), 0)
    return Columns([(state, batch, 0, len(batch))]), state


@pytest.mark.parametrize(("fmt", "expected"), [("lines", b"a\nbb\nc\nd\n"),
                                               ("raw", b"abbcd")])
def test_columns_are_written_and_acknowledged_per_run(tmp_path: Path, fmt: str,
                                                      expected: bytes) -> None:
    out = tmp_path / "out"
    tracker = AckTracker()
    sink = FileSink(tracker, str(out), fmt)
    sink.start()
    stale, _ = _columns(1, [b"old"])
    tracker.revoke([("t", 0, 1)])  # the claim of `stale` is revoked: never written
    first, _ = _columns(0, [b"a", b"bb"])
    second, _ = _columns(1, [b"c", b"d"])  # a new claim of the revoked partition
    sink.submit_columns(first)
    sink.submit_columns(stale)
    sink.submit_columns(second)
    sink.close(1.0)
    assert out.read_bytes() == expected
    taken = {(m.partition_id, m.value) for m in tracker.take()}
    assert taken == {(0, b"bb"), (1, b"d")}
    assert tracker.acked_messages == 4  # the stale run was dropped before it was written


def test_columns_in_jsonl_match_the_per_message_encoding(tmp_path: Path) -> None:
    cols, _ = _columns(0, [b"x", b'q"uote'])
    a, b = tmp_path / "a", tmp_path / "b"
    for path, submit in ((a, "columns"), (b, "messages")):
        sink = FileSink(AckTracker(), str(path), "jsonl")
        sink.start()
        if submit == "columns":
            sink.submit_columns(cols)
        else:
            sink.submit(list(cols.messages()))
        sink.close(1.0)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes().count(b"\n") == 2
