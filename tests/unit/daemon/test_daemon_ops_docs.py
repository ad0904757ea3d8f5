"""docs/operations.md keeps up with the daemon: every log event documented, fatal errors in
the chosen log format (issue 22 item 11)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OPERATIONS = ROOT / "docs" / "operations.md"
#: what `zkconsumer run` runs: the daemon, its sinks, the HTTP server, the CLI dispatcher and
#: the start-up wait for ZooKeeper
SOURCES = [*sorted((ROOT / "zkconsumer" / "daemon").rglob("*.py")),
           ROOT / "zkconsumer" / "telemetry" / "http.py", ROOT / "zkconsumer" / "cli.py",
           ROOT / "zkconsumer" / "zk" / "session.py"]


def _logs_section() -> str:
    text = OPERATIONS.read_text()
    start = text.index("\n## Logs\n")
    return text[start:text.index("\n## ", start + 1)]


def test_every_event_the_daemon_emits_is_documented() -> None:
    emitted = {name for path in SOURCES
               for name in re.findall(r"[\"']event[\"']:\s*[\"'](\w+)[\"']", path.read_text())}
    assert {"sink_failed", "sink_terminate", "start"} <= emitted  # the scan finds them
    documented = set(re.findall(r"`(\w+)`", _logs_section()))
    assert sorted(emitted - documented) == []


def test_a_fatal_error_is_a_json_line_with_json_logs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "run", "--zk", "127.0.0.1:1", "--group", "g",
         "--topic", "t", "--output", "-", "--log-format", "json", "--set", "fetch.sise=1"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # every line, the last one too
    last = records[-1]
    assert last["message"].startswith("zkconsumer run: error: --set fetch.sise")
    assert last["level"] == "ERROR" and last["event"] == "fatal_error"
    assert last["exit_status"] == 1


def test_a_fatal_error_stays_one_plain_line_with_text_logs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "run", "--zk", "127.0.0.1:1", "--group", "g",
         "--topic", "t", "--output", "-", "--set", "fetch.sise=1"],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].startswith("zkconsumer run: error: --set fetch.sise")


#: Every reason `/healthz` can answer 503 with (runner.Daemon.health, daemon/health.py).
HEALTH_503 = ["not connected to ZooKeeper", "ZooKeeper session lost", "closed",
              "ZooKeeper watches not armed for", "assignment disagrees with the group's decision",
              "owns no partition"]


def test_every_unhealthy_reason_is_in_troubleshooting() -> None:
    code = "".join(p.read_text() for p in SOURCES)
    text = OPERATIONS.read_text()
    troubleshooting = text[text.index("\n## Troubleshooting\n"):]
    for reason in HEALTH_503:
        assert reason in code, reason  # the list above is still what the code says
        assert re.search("503[ `\"]*" + re.escape(reason), troubleshooting), reason


def test_rebalance_and_handler_numbers_are_explained_in_troubleshooting() -> None:
    text = OPERATIONS.read_text()
    troubleshooting = text[text.index("\n## Troubleshooting\n"):]
    for needle in ("rebalance attempt N/M", "rebalanced in 6.790s (attempt 7)",
                   "(attempt K/1+N)", "dead-lettering now"):
        assert needle in troubleshooting, needle
