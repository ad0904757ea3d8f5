"""``zkconsumer run --exec`` and the processes of its child (issue 22 items 8 and 9).

* A child that ignores SIGTERM and has a child of its own (``trap '' TERM; sleep 300 &``):
  SIGTERM to the daemon ends the whole process group of the exec command -- SIGTERM, then
  SIGKILL -- and the daemon exits within ``--shutdown-timeout`` plus a small slack
  (`STOP_SLACK`, documented in docs/operations.md), signal to exit.  Nothing of the command
  survives (checked in ``/proc``).
* A second SIGTERM during the stop exits at once -- and still takes the command's processes
  with it.
* Killing the ``/bin/sh`` wrapper of an exec command (its command still running, holding the
  pipes) is noticed: the rest of the group is ended, ``sink_restart`` is logged, and a new
  child gets every unacknowledged message (counted: nothing lost).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from daemon_it_helpers import DaemonProcess, produce, values
from fixtures.waiting import wait_until

SHUTDOWN_TIMEOUT = 3.0
#: signal-to-exit slack beyond --shutdown-timeout: interpreter start-up of the signal
#: handler and process teardown (docs/operations.md, "Signals").
STOP_SLACK = 1.0

# Acknowledges every line; ignores SIGTERM, and so does its own child (inherited); after
# stdin EOF it lingers on that child instead of exiting.
STUBBORN = """\
trap '' TERM
sleep 300 &
echo "$$ $!" > "{pids}"
while IFS= read -r line; do echo "$line" >> "{seen}"; echo ok; done
wait
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, killed and not reaped yet, is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _run_stubborn(tmp_path: Path, zk_connect: str, shutdown_timeout: float,
                  n: int) -> tuple[DaemonProcess, int, int]:
    """A member whose exec child is `STUBBORN`, after it was handed all ``n`` messages of
    "ev": (the daemon, the child's shell pid, its ``sleep`` pid)."""
    pids, seen = tmp_path / "stubborn.pids", tmp_path / "seen.txt"
    script = tmp_path / "stubborn.sh"
    script.write_text(STUBBORN.format(pids=pids, seen=seen))
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--exec", f"exec sh '{script}'",  # the group leader ignores SIGTERM
        "--shutdown-timeout", str(shutdown_timeout)])
    try:
        d.wait_stable()
        wait_until(lambda: pids.exists() and len(pids.read_text().split()) == 2,
                   what="the child wrote its pids")
        wait_until(lambda: seen.exists() and len(seen.read_bytes().splitlines()) == n,
                   what=f"all {n} messages handed to the child")
    except BaseException:
        d.close()
        raise
    shell, sleeper = (int(p) for p in pids.read_text().split())
    return d, shell, sleeper


def test_sigterm_ends_a_stubborn_child_and_its_child_within_the_shutdown_timeout(
        tmp_path: Path, dev_broker: Any, zk_connect: str) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "ev", values("s", 50))
    d, shell, sleeper = _run_stubborn(tmp_path, zk_connect, SHUTDOWN_TIMEOUT, 50)
    try:
        assert _alive(shell) and _alive(sleeper)
        started = time.monotonic()
        d.send_signal(signal.SIGTERM)
        status = d.proc.wait(SHUTDOWN_TIMEOUT + 30)
        elapsed = time.monotonic() - started
    finally:
        d.close()
    assert status == 0, d.log
    assert elapsed <= SHUTDOWN_TIMEOUT + STOP_SLACK, (elapsed, d.log)
    assert "did not exit after stdin EOF; terminating its process group" in d.log
    assert "ignored SIGTERM; killing its process group" in d.log
    assert not _alive(shell) and not _alive(sleeper), d.log


def test_a_second_sigterm_exits_at_once_and_takes_the_child_along(
        tmp_path: Path, dev_broker: Any, zk_connect: str) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("s", 10))
    d, shell, sleeper = _run_stubborn(tmp_path, zk_connect, 30.0, 10)
    try:
        d.send_signal(signal.SIGTERM)
        wait_until(lambda: "did not exit after stdin EOF" in d.log or "stopping" in d.log,
                   what="the stop began")
        d.send_signal(signal.SIGTERM)
        status = d.proc.wait(10)
    finally:
        d.close()
    assert status == 128 + signal.SIGTERM, d.log
    wait_until(lambda: not _alive(shell) and not _alive(sleeper), timeout=5,
               what="the exec command's processes are gone")


CHILD = """
import sys
for line in sys.stdin.buffer:
    sys.stdout.write("ok\\n"); sys.stdout.flush()
"""


def test_killing_the_sh_wrapper_is_noticed_and_the_command_restarted(
        tmp_path: Path, dev_broker: Any, zk_connect: str) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("w", 100))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    out = tmp_path / "seen.txt"
    # a command list keeps /bin/sh as the parent of python (no exec optimisation)
    cmd = f"tee -a '{out}' | '{sys.executable}' -u '{script}'; true"
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--exec", cmd, "--restart-backoff", "0.05"])
    try:
        d.wait_stable()
        wait_until(lambda: out.exists() and len(out.read_bytes().splitlines()) >= 100,
                   what="first 100 messages")
        first = int(re.findall(r"exec child pid (\d+) started", d.log)[0])
        group = [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == first]
        assert len(group) >= 3, group  # sh, tee, python
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: "sink_restart" in d.log, what="the dead wrapper noticed")
        wait_until(lambda: not any(_alive(p) for p in group), timeout=5,
                   what="the rest of the old group ended")
        produce(zk_connect, "ev", values("w", 100, start=100))
        wait_until(lambda: set(out.read_bytes().splitlines()) >= set(values("w", 200)),
                   what="every message reached a child")
    finally:
        d.close()


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
