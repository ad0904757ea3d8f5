"""`zkconsumer bench produce --reference` runs end to end (tiny volume; an in-process broker,
or the sink process) and prints Scala's figures beside the two ProducerPerformance-like
cases."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from fixtures.waiting import wait_until

from zkconsumer.cli import main


@pytest.mark.parametrize("where", ["--in-process", "--sink"])
def test_bench_produce_reference_cases(capsys: pytest.CaptureFixture[str], where: str) -> None:
    status = main(["bench", "produce", "--reference", where, "--mb", "0.3", "--verbose"])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    cases = [line for line in out if not line.startswith("#")]
    sink = " (sink)" if where == "--sink" else ""
    assert [line.split(":")[0] for line in cases] == [
        f"produce async x1 b200{sink} none 100B", f"produce sync x200{sink} none 100B"]
    for line, scala in zip(cases, ("1.1-1.4 M msg/s", "1.4-1.6 M msg/s"), strict=True):
        m = re.fullmatch(r"[^:]+: (\d+) msg/s \(\d+\.\d MB/s\)  \[Scala 0\.7\.2 "
                         r"ProducerPerformance: (.+)\]", line)
        assert m and int(m.group(1)) > 0 and m.group(2) == scala, line
    assert sum("CPU s per M messages" in line for line in out) == 2


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_the_sink_process_ends_with_the_bench_that_started_it() -> None:
    script = ("import os; from zkconsumer.bench.produce import Sink; s = Sink(0); "
              "print(s._proc.pid, flush=True); os._exit(0)")  # dies without stop()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=60)
    pid = int(out.stdout)
    wait_until(lambda: not _alive(pid), what="orphaned sink process to exit")
