"""ExecSink with commands that cannot run or keep dying at once: fail fast, cap, keep restarts.

Real ``/bin/sh`` children: a missing command (sh exits 127), a non-executable file (126), a
command that exits at once every time, and one that worked before exiting 127.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from daemon_unit_helpers import make_messages, python_command
from fixtures.waiting import wait_until

from zkconsumer.daemon.sinks.exec import ExecSink
from zkconsumer.daemon.tracker import AckTracker
from zkconsumer.errors import SinkError

# First child: acknowledges 3 messages, then exits 127 as if a command it ran vanished.
# Later children acknowledge everything.
WORKED_THEN_127 = """
    import os, sys
    first = os.environ["ZKCONSUMER_RESTARTS"] == "0"
    n = 0
    for line in sys.stdin.buffer:
        n += 1
        sys.stdout.write("ok\\n"); sys.stdout.flush()
        if first and n == 3:
            os._exit(127)
"""


def _sink(command: str, *, startup_probe: float = 0.2, max_restarts: int = 10) -> ExecSink:
    return ExecSink(AckTracker(), command, restart_backoff=0.01, restart_backoff_max=0.02,
                    startup_probe=startup_probe, max_restarts=max_restarts)


@pytest.mark.parametrize(("kind", "status", "why"), [
    ("missing", 127, "command not found"),
    ("directory", 126, "found but not executable"),
])
def test_command_that_cannot_run_fails_start(tmp_path: Path, kind: str, status: int,
                                             why: str) -> None:
    command = "no-such-command-zkconsumer-test --flag" if kind == "missing" else str(tmp_path)
    sink = _sink(command, startup_probe=5.0)  # generous: a loaded machine still fails here
    started = time.monotonic()
    with pytest.raises(SinkError) as info:
        sink.start()
    assert time.monotonic() - started < 5.0  # returned when the shell exited, not at 5 s
    assert str(info.value) == (f"--exec {command!r} cannot be started: /bin/sh exited with "
                               f"status {status} ({why})")
    assert sink.restarts == 0 and sink.child_pid is None
    sink.close(1.0)


def test_command_not_found_after_the_probe_stops_the_supervisor(tmp_path: Path) -> None:
    # probe 0: start() returns at once; the supervisor sees 127 from a never-working child
    sink = _sink("sleep 0.3; no-such-command-zkconsumer-test", startup_probe=0.0)
    sink.start()
    try:
        sink.submit(make_messages(5))
        wait_until(lambda: sink.failure is not None, what="sink gave up")
        assert "cannot be started: /bin/sh exited with status 127" in str(sink.failure)
        assert sink.restarts == 0
        assert sink.tracker.acked_messages == 0 and sink.inflight() == 5
    finally:
        sink.close(1.0)


def test_quick_failures_in_a_row_are_capped(tmp_path: Path) -> None:
    sink = _sink("exit 3", max_restarts=2)
    sink.start()
    try:
        sink.submit(make_messages(4))
        wait_until(lambda: sink.failure is not None, what="sink gave up")
        assert sink.restarts == 2 and sink.errors == 3  # first child + 2 restarts
        assert str(sink.failure) == ("--exec 'exit 3': the child exited within 1s without "
                                     "acknowledging anything 3 times in a row (last status 3; "
                                     "--exec-max-restarts 2)")
        assert sink.tracker.acked_messages == 0 and sink.tracker.take() == []
        assert sink.child_pid is None
    finally:
        sink.close(1.0)


def test_zero_max_restarts_restarts_forever(tmp_path: Path) -> None:
    sink = _sink("exit 3", max_restarts=0)
    sink.start()
    try:
        wait_until(lambda: sink.restarts >= 15, what="many restarts")
        assert sink.failure is None
    finally:
        sink.close(1.0)


def test_child_that_worked_is_restarted_even_after_status_127(tmp_path: Path) -> None:
    sink = _sink(python_command(tmp_path, "child", WORKED_THEN_127), max_restarts=1)
    sink.start()
    try:
        batch = make_messages(10)
        sink.submit(batch)
        wait_until(lambda: sink.tracker.acked_messages == 10, what="all acked after restart")
        assert sink.failure is None and sink.restarts == 1
        assert sink.tracker.take() == [batch[-1]]
    finally:
        sink.close(2.0)
