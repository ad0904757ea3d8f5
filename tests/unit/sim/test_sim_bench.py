"""``zkconsumer bench simulate`` as a user runs it: the one summary line, exit codes, traces."""

from __future__ import annotations

import re
import subprocess
import sys


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkconsumer", "bench", "simulate", *args],
                          capture_output=True, text=True, timeout=300)


def test_it_ends_with_the_summary_line_and_exits_0() -> None:
    result = _run("--seeds", "6", "--start", "100", "--workers", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"simulated 6 schedules: 0 invariant violations, \d+ rebalances, "
                        r"[\d.]+ ZooKeeper ops per rebalance \(median\), [\d.]+ s", last), last


def test_trace_replays_one_seed_with_its_story() -> None:
    result = _run("--start", "3", "--trace", "--members", "2")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("simulated 1 schedules: 0 invariant violations")
    assert any(" -> Create(" in line for line in lines)  # the machine's commands
    assert any("REBALANCING -> STABLE" in line for line in lines)  # its own log


def test_a_bad_option_is_one_line_and_exit_2() -> None:
    result = _run("--faults", "kill,meteor")
    assert result.returncode == 2
    assert "unknown fault kind(s) ['meteor']" in result.stderr
