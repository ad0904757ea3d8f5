"""`zkconsumer bench produce --reference` runs end to end (tiny volume; an in-process broker,
or the sink process) and prints Scala's figures beside the two ProducerPerformance-like
cases."""

from __future__ import annotations

import re

import pytest

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
