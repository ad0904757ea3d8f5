"""``zkconsumer run --exec`` with a command that cannot run or keeps dying at once.

* a command that does not exist: exit 1 with one ``zkconsumer run: error:`` line, before the
  member ever registers in the group, nothing committed;
* a child that worked (acknowledged 10 messages) and then dies at once on every restart:
  after ``--exec-max-restarts`` the daemon exits 1, having committed exactly the 10
  acknowledged messages and nothing after them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from daemon_it_helpers import DaemonProcess, committed, produce, values
from kazoo.client import KazooClient

# First child: acknowledges 10 messages one by one, then exits 1.  Later children exit 1 at
# once (a downstream that is gone).
CHILD = """
import os, sys
if os.environ["ZKCONSUMER_RESTARTS"] != "0":
    sys.exit(1)
for n, line in enumerate(sys.stdin.buffer, 1):
    sys.stdout.write("ok\\n"); sys.stdout.flush()
    if n == 10:
        sys.exit(1)
"""


def _error_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("zkconsumer run: error:")]


def test_missing_command_fails_fast_and_commits_nothing(tmp_path: Path, dev_broker: Any,
                                                        zk_connect: str,
                                                        zk_client: KazooClient) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("m", 20))
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--exec", "no-such-command-zkconsumer-test --x",
        "--restart-backoff", "0.05"])
    try:
        assert d.proc.wait(30) == 1, d.log
    finally:
        d.close()
    assert _error_lines(d.log) == [
        "zkconsumer run: error: --exec 'no-such-command-zkconsumer-test --x' cannot be "
        "started: /bin/sh exited with status 127 (command not found)"], d.log
    assert "sink_restart" not in d.log and "starting member" not in d.log
    assert not zk_client.exists("/consumers/g/ids") or zk_client.get_children(
        "/consumers/g/ids") == []
    assert committed(zk_client, "g", "ev") == {}


def test_quick_failures_after_work_exit_1_committing_only_acknowledged(
        tmp_path: Path, dev_broker: Any, zk_connect: str, zk_client: KazooClient) -> None:
    broker = dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("m", 100))  # "m-000000": 8 bytes + 10-byte header each
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cmd = f"exec '{sys.executable}' '{script}'"
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--exec", cmd, "--restart-backoff", "0.05",
        "--restart-backoff-max", "0.1", "--exec-max-restarts", "2",
        "--set", "autocommit.interval.ms=60000"])
    try:
        assert d.proc.wait(60) == 1, d.log
    finally:
        d.close()
    assert _error_lines(d.log) == [
        f"zkconsumer run: error: --exec {cmd!r}: the child exited within 1s without "
        "acknowledging anything 3 times in a row (last status 1; --exec-max-restarts 2)"], d.log
    assert d.log.count("sink_restart") == 3  # the worked child + 2 quick ones, then give up
    assert committed(zk_client, "g", "ev") == {f"{broker.broker_id}-0": 10 * 18}
    assert zk_client.get_children("/consumers/g/ids") == []
