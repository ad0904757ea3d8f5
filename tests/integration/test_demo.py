"""``zkconsumer demo`` -- the README's first command -- runs end to end and verifies itself."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_demo_runs_and_verifies(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    workdir = tmp_path / "demo"
    result = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "demo", "--messages", "300", "--dir", str(workdir),
         "--keep"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "broker 0: 4 partitions, broker 1: 4 partitions (8 in all)" in out
    assert "verified: all " in out and " produced messages were consumed" in out
    assert out.count("exited with status 0") == 2
    assert "group demo-group: 2 member(s)" in out  # the assignment was shown
    # the monitor's one-shot evaluation of the group: OK, 2 members, 8 partitions
    assert re.search(r"\n    demo-group +OK +2 +8 ", out) and "(exit status 0)" in out, out
    # --keep left the daemons' outputs; together they hold every sample message
    written = set()
    for name in ("consumer-1.txt", "consumer-2.txt"):
        written |= set((workdir / name).read_bytes().splitlines())
    assert {f"demo message {i:06d}".encode() for i in range(300)} <= written
