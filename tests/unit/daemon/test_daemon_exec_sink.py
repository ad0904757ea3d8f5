"""ExecSink with real child processes: protocol, batch acks, crash + redelivery, shutdown."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from daemon_unit_helpers import make_messages, python_command
from fixtures.waiting import wait_until

from zkconsumer.consumer import Columns
from zkconsumer.consumer.message import PartitionState
from zkconsumer.daemon.sinks.exec import ExecSink, ProtocolViolation, parse_acks
from zkconsumer.daemon.tracker import AckTracker
from zkconsumer.protocol import encode_message_set
from zkconsumer.protocol.batch import decode_batch

# Acknowledges every line with "ok" after recording it (argv[1]).
ACK_EACH = """
    import sys
    rec = open(sys.argv[1], "ab")
    for line in sys.stdin.buffer:
        rec.write(line); rec.flush()
        sys.stdout.write("ok\\n"); sys.stdout.flush()
"""

# Reads what is available and acknowledges it with one "ack N".
ACK_BATCH = """
    import os, sys
    rec = open(sys.argv[1], "ab")
    buf = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\\n")
        if lines:
            rec.write(b"".join(l + b"\\n" for l in lines)); rec.flush()
            os.write(1, b"ack %d\\n" % len(lines))
"""

# First child: acknowledges 3 messages, then dies having read more.  Later ones ack all.
CRASH_ONCE = """
    import os, sys
    rec = open(sys.argv[1], "ab")
    first = os.environ["ZKCONSUMER_RESTARTS"] == "0"
    n = 0
    for line in sys.stdin.buffer:
        rec.write(os.environ["ZKCONSUMER_RESTARTS"].encode() + b" " + line); rec.flush()
        n += 1
        if first and n > 5:
            os._exit(3)
        if not first or n <= 3:
            sys.stdout.write("ok\\n"); sys.stdout.flush()
"""

NEVER_ACK = """
    import sys, time
    for line in sys.stdin.buffer:
        pass
    time.sleep(60)   # ignores EOF too
"""

BAD_PROTOCOL = """
    import os, sys
    for line in sys.stdin.buffer:
        if os.environ["ZKCONSUMER_RESTARTS"] == "0":
            sys.stdout.write("hello\\n")
        else:
            sys.stdout.write("ok\\n")
        sys.stdout.flush()
"""

BINARY_ACK = """
    import struct, sys
    rec = open(sys.argv[1], "ab")
    inp = sys.stdin.buffer
    while True:
        head = inp.read(4)
        if len(head) < 4:
            break
        (n,) = struct.unpack(">i", head)
        rec.write(inp.read(n) + b"|"); rec.flush()
        sys.stdout.write("ack 1\\n"); sys.stdout.flush()
"""


def _sink(tmp_path: Path, source: str, fmt: str = "lines", **kw: float) -> tuple[ExecSink, Path]:
    rec = tmp_path / "received"
    cmd = python_command(tmp_path, "child", source) + f" '{rec}'"
    backoff = kw.get("backoff", 0.05)
    sink = ExecSink(AckTracker(), cmd, fmt, restart_backoff=backoff, restart_backoff_max=backoff)
    return sink, rec


def test_parse_acks() -> None:
    assert parse_acks([b"ok", b"ok"]) == 2
    assert parse_acks([b"ack 5", b"", b"ok\r", b" ack 2 "]) == 8
    for bad in ([b"ack 0"], [b"ack x"], [b"okay"], [b"ack -1"]):
        with pytest.raises(ProtocolViolation):
            parse_acks(bad)


@pytest.mark.parametrize("source", [ACK_EACH, ACK_BATCH])
def test_acknowledged_messages_reach_tracker(tmp_path: Path, source: str) -> None:
    sink, rec = _sink(tmp_path, source)
    sink.start()
    try:
        a = make_messages(50, partition=0)
        b = make_messages(30, partition=1)
        sink.submit(a[:20])
        sink.submit(b)
        sink.submit(a[20:])
        wait_until(lambda: sink.tracker.acked_messages == 80, what="80 acks")
        assert sink.inflight() == 0
        assert sorted(sink.tracker.take(), key=lambda m: m.partition_id) == [a[-1], b[-1]]
        assert rec.read_bytes() == b"".join(m.value + b"\n" for m in a[:20] + b + a[20:])
    finally:
        sink.close(2.0)


def test_crashed_child_gets_unacknowledged_messages_again(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, CRASH_ONCE)
    sink.start()
    try:
        batch = make_messages(10)
        sink.submit(batch)
        wait_until(lambda: sink.tracker.acked_messages == 10, what="all acked after restart")
        assert sink.restarts == 1 and sink.errors == 1
        lines = rec.read_bytes().splitlines()
        first = [line.split(b" ")[1] for line in lines if line.startswith(b"0 ")]
        second = [line.split(b" ")[1] for line in lines if line.startswith(b"1 ")]
        assert first == [m.value for m in batch[:6]]
        # exactly the unacknowledged ones (m3..m9), in order, nothing skipped
        assert second == [m.value for m in batch[3:]]
        assert sink.redelivered == 7
        assert sink.tracker.take() == [batch[-1]]
    finally:
        sink.close(2.0)


def test_kill_9_of_child_loses_nothing(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, ACK_BATCH)
    sink.start()
    try:
        batch = make_messages(2000)
        sink.submit(batch[:1000])
        wait_until(lambda: sink.tracker.acked_messages >= 1, what="first acks")
        pid = sink.child_pid
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        sink.submit(batch[1000:])
        wait_until(lambda: sink.tracker.acked_messages == 2000 and sink.inflight() == 0,
                   what="every message acknowledged")
        assert sink.restarts == 1
        received = set(rec.read_bytes().splitlines())
        assert received == {m.value for m in batch}
        assert sink.tracker.take() == [batch[-1]]
    finally:
        sink.close(2.0)


def test_protocol_violation_restarts_child(tmp_path: Path) -> None:
    sink, _ = _sink(tmp_path, BAD_PROTOCOL)
    sink.start()
    try:
        sink.submit(make_messages(3))
        wait_until(lambda: sink.tracker.acked_messages == 3, what="acks from 2nd child")
        assert sink.restarts == 1
    finally:
        sink.close(2.0)


def test_binary_format(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, BINARY_ACK, fmt="binary")
    sink.start()
    try:
        batch = make_messages(5)
        sink.submit(batch)
        wait_until(lambda: sink.tracker.acked_messages == 5, what="5 acks")
        assert rec.read_bytes() == b"m0|m1|m2|m3|m4|"
    finally:
        sink.close(2.0)


def test_inflight_drain_and_bounded_close(tmp_path: Path) -> None:
    sink, _ = _sink(tmp_path, NEVER_ACK)
    sink.start()
    sink.submit(make_messages(7))
    assert sink.inflight() == 7
    assert sink.drain(0.1) is False
    started = time.monotonic()
    sink.close(0.3)  # EOF is ignored: SIGTERM follows
    assert time.monotonic() - started < 5.0
    assert sink.tracker.acked_messages == 0
    assert sink.tracker.take() == []


def _alive(pid: int) -> bool:
    """A live process (a killed zombie not reaped yet does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_close_ends_a_child_that_ignores_sigterm_and_its_child_within_the_timeout(
        tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    sink = ExecSink(AckTracker(), f"exec sh -c 'trap \"\" TERM; sleep 300 & echo $$ $! > {pids}; "
                                  "cat >/dev/null; wait'")
    sink.start()
    wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="pids")
    shell, sleeper = (int(p) for p in pids.read_text().split())
    started = time.monotonic()
    sink.close(1.0)  # EOF, SIGTERM (ignored), SIGKILL of the group: all inside 1 s
    assert time.monotonic() - started < 1.2
    assert not _alive(shell) and not _alive(sleeper)


def test_a_killed_shell_ends_its_group_and_is_restarted(tmp_path: Path) -> None:
    # "; true" keeps /bin/sh as the parent of python: killing sh alone leaves python behind
    sink, rec = _sink(tmp_path, ACK_EACH)
    sink.command += "; true"
    sink.start()
    try:
        sink.submit(make_messages(3))
        wait_until(lambda: sink.tracker.acked_messages == 3, what="first acks")
        shell = sink.child_pid
        assert shell is not None
        group = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == shell]
        os.kill(shell, signal.SIGKILL)
        wait_until(lambda: sink.restarts == 1, what="the dead shell noticed")
        wait_until(lambda: not any(_alive(p) for p in group), what="its group gone")
        sink.submit(make_messages(2, start=1000))
        wait_until(lambda: sink.tracker.acked_messages == 5, what="the new child acks")
    finally:
        sink.close(2.0)
    assert len(rec.read_bytes().splitlines()) == 5  # each message once: all were acked


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def test_drain_waits_for_acks(tmp_path: Path) -> None:
    sink, _ = _sink(tmp_path, ACK_EACH)
    sink.start()
    try:
        sink.submit(make_messages(100))
        assert sink.drain(10.0) is True
        assert sink.tracker.acked_messages == 100
    finally:
        sink.close(2.0)


def test_revoked_messages_are_not_redelivered(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, CRASH_ONCE, backoff=0.3)  # revoke lands before the restart
    sink.start()
    try:
        p0 = make_messages(4, partition=0, prefix="a")
        p1 = make_messages(4, partition=1, prefix="b")
        sink.submit(p0 + p1)   # child 0 acks a0..a2, reads up to b1, dies
        sink.tracker.revoke([("t", 0, 1)])   # partition 1 moved away meanwhile
        wait_until(lambda: sink.inflight() == 0, what="remaining acks")
        second = [line.split(b" ")[1] for line in rec.read_bytes().splitlines()
                  if line.startswith(b"1 ")]
        assert second == [b"a3"]
        assert sink.tracker.take() == [p0[-1]]
    finally:
        sink.close(2.0)


# Claims two acknowledgements for every message it reads (the first child only).
OVER_ACK = """
    import os, sys
    rec = open(sys.argv[1], "ab")
    first = os.environ["ZKCONSUMER_RESTARTS"] == "0"
    for line in sys.stdin.buffer:
        rec.write(os.environ["ZKCONSUMER_RESTARTS"].encode() + b" " + line); rec.flush()
        sys.stdout.write("ack 2\\n" if first else "ok\\n"); sys.stdout.flush()
"""


def test_child_acknowledging_more_than_it_was_sent_is_restarted(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, OVER_ACK)
    sink.start()
    try:
        batch = make_messages(1)
        sink.submit(batch)
        wait_until(lambda: sink.tracker.acked_messages == 1, what="ack from the 2nd child")
        assert sink.restarts == 1
        assert rec.read_bytes().splitlines() == [b"0 m0", b"1 m0"]  # redelivered, once
        assert sink.tracker.take() == [batch[0]]
        assert sink.inflight() == 0
    finally:
        sink.close(2.0)


def test_batch_polled_before_a_rebalance_skips_revoked_partitions(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, ACK_EACH)
    sink.start()
    try:
        a = make_messages(3, partition=0, prefix="a")
        b = make_messages(2, partition=1, prefix="b")
        sink.tracker.revoke([("t", 0, 0)])
        sink.submit(a + b)
        assert sink.inflight() == 2
        assert sink.drain(10.0)
        assert rec.read_bytes() == b"b0\nb1\n"
        assert sink.tracker.take() == [b[-1]]
    finally:
        sink.close(2.0)


# First child: one complete "ok", then an "ok" without its newline, then it crashes.
TORN_ACK = """
    import os, sys
    rec = open(sys.argv[1], "ab")
    first = os.environ["ZKCONSUMER_RESTARTS"] == "0"
    for line in sys.stdin.buffer:
        rec.write(os.environ["ZKCONSUMER_RESTARTS"].encode() + b" " + line); rec.flush()
        if first and line == b"m1\\n":
            os.write(1, b"ok")   # torn: the crash lands before the newline
            os._exit(9)
        os.write(1, b"ok\\n")
"""


def test_torn_last_ack_line_of_a_crashed_child_does_not_count(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, TORN_ACK)
    sink.start()
    try:
        batch = make_messages(3)
        sink.submit(batch)
        wait_until(lambda: sink.tracker.acked_messages == 3, what="3 acks")
        assert sink.restarts == 1
        second = [line[2:] for line in rec.read_bytes().splitlines() if line[:2] == b"1 "]
        assert second == [b"m1", b"m2"]  # m1 (torn ack) re-sent, m0 not
        assert sink.tracker.take() == [batch[-1]]
    finally:
        sink.close(2.0)


# -- the batch path (`submit_columns`): runs are written and tracked without a Message each --


def _columns(runs: dict[int, list[bytes]]) -> Columns:
    """One poll's `Columns`: a run per partition (a fresh claim each), in dict order."""
    segments = []
    for partition, values in runs.items():
        state = PartitionState("t", 0, partition, "t-thread-0", 0, 0, 1024)
        batch = decode_batch(encode_message_set(values), 0)
        segments.append((state, batch, 0, len(batch)))
    return Columns(segments)


def _last_offsets(cols: Columns) -> dict[int, int]:
    return {run.partition_id: run.next_offset for run in cols.runs()}


def test_columns_crashed_child_gets_the_rest_of_a_run_again(tmp_path: Path) -> None:
    # child 0 acknowledges a0..a2 (3 of partition 0's 5: the ack ends inside a run), reads
    # up to b0 and dies; child 1 must get a3, a4 (the run's rest) and b0..b4, in order.
    sink, rec = _sink(tmp_path, CRASH_ONCE)
    sink.start()
    try:
        cols = _columns({0: [b"a%d" % i for i in range(5)], 1: [b"b%d" % i for i in range(5)]})
        sink.submit_columns(cols)
        wait_until(lambda: sink.tracker.acked_messages == 10, what="all acked after restart")
        assert sink.restarts == 1 and sink.redelivered == 7
        lines = rec.read_bytes().splitlines()
        second = [line.split(b" ")[1] for line in lines if line.startswith(b"1 ")]
        assert second == [b"a3", b"a4"] + [b"b%d" % i for i in range(5)]
        taken = {m.partition_id: m.next_offset for m in sink.tracker.take()}
        assert taken == _last_offsets(cols)
    finally:
        sink.close(2.0)


def test_columns_partial_ack_moves_the_offset_to_the_acknowledged_message(
        tmp_path: Path) -> None:
    # Only CRASH_ONCE's first child runs (the restart backoff outlasts the test): its 3 "ok"s
    # leave the tracker at the run's 3rd message, not at the run's end.
    sink, _ = _sink(tmp_path, CRASH_ONCE, backoff=30.0)  # no restart within the test
    sink.start()
    try:
        cols = _columns({0: [b"a%d" % i for i in range(8)]})
        sink.submit_columns(cols)
        wait_until(lambda: sink.errors == 1, what="child 0 died")
        assert sink.tracker.acked_messages == 3 and sink.inflight() == 5
        (acked,) = sink.tracker.take()
        run = cols.runs()[0]
        assert (acked.value, acked.next_offset) == (b"a2", run.next_offsets[2])
    finally:
        sink.close(0.5)


def test_columns_revoked_runs_are_neither_written_nor_redelivered(tmp_path: Path) -> None:
    sink, rec = _sink(tmp_path, CRASH_ONCE, backoff=0.3)  # revoke lands before the restart
    sink.start()
    try:
        stale = _columns({2: [b"s0", b"s1"]})
        sink.tracker.revoke([("t", 0, 2)])
        sink.submit_columns(stale)  # polled before the rebalance: dropped whole
        assert sink.inflight() == 0
        cols = _columns({0: [b"a%d" % i for i in range(4)], 1: [b"b%d" % i for i in range(4)]})
        sink.submit_columns(cols)   # child 0 acks a0..a2, reads up to b1, dies
        sink.tracker.revoke([("t", 0, 1)])   # partition 1 moved away meanwhile
        wait_until(lambda: sink.inflight() == 0, what="remaining acks")
        lines = rec.read_bytes().splitlines()
        assert not [line for line in lines if b" s" in line]
        second = [line.split(b" ")[1] for line in lines if line.startswith(b"1 ")]
        assert second == [b"a3"]
        taken = {m.partition_id: m.next_offset for m in sink.tracker.take()}
        assert taken == {0: _last_offsets(cols)[0]}
    finally:
        sink.close(2.0)


@pytest.mark.parametrize("fmt", ["lines", "jsonl", "binary"])
def test_columns_and_messages_feed_the_child_the_same_bytes(tmp_path: Path, fmt: str) -> None:
    cols = _columns({0: [b"x", b'q"uote', b"\xff"], 3: [b"", b"y"]})
    streams = []
    for path in ("columns", "messages"):
        sub = tmp_path / path
        sub.mkdir()
        sink, rec = _sink(sub, NEVER_ACK.replace("pass", "open(sys.argv[1], 'ab').write(line)")
                          if fmt != "binary" else RECORD_ALL, fmt)
        sink.start()
        try:
            if path == "columns":
                sink.submit_columns(cols)
            else:
                sink.submit(list(cols.messages()))
        finally:
            sink.close(1.0)
        streams.append(rec.read_bytes())
    assert streams[0] == streams[1] and streams[0]


# Records its stdin byte for byte, acknowledges nothing.
RECORD_ALL = """
    import os, sys
    with open(sys.argv[1], "ab") as rec:
        for chunk in iter(lambda: os.read(0, 65536), b""):
            rec.write(chunk)
"""
