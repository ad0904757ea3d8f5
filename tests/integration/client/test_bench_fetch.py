"""`zkconsumer bench fetch` end to end (tiny volume, in-process dev broker): one line per case
and decoder path, each with msg/s, MB/s and CPU seconds per million messages."""

from __future__ import annotations

import re

import pytest

from zkconsumer.cli import main
from zkconsumer.protocol import accel, active_decoder

LINE = re.compile(r"fetch (batches|columns|messages) (none|gzip) 100B (compiled|pure): (\d+) msg/s "
                  r"\((\d+\.\d) MB/s, (\d+\.\d{3}) CPU s/M msg\)"
                  r"(  \[Scala 0\.7\.2 SimpleConsumer: 4\.6 M msg/s\])?")


def test_bench_fetch_prints_every_case_on_both_paths(capsys: pytest.CaptureFixture[str]) -> None:
    before = active_decoder()
    status = main(["bench", "fetch", "--in-process", "--mb", "0.05", "--seconds", "0",
                   "--size", "100B", "--codec", "none", "--codec", "gzip", "--wrap", "50"])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"# decoder: {accel.IMPLEMENTATION}") for line in out)
    cases = [line for line in out if not line.startswith("#")]
    paths = ["compiled", "pure"] if accel.speedups is not None else ["pure"]
    assert sorted(line.split(":")[0] for line in cases) == sorted(
        f"fetch {kind} {codec} 100B {path}" for kind in ("batches", "columns", "messages")
        for codec in ("none", "gzip") for path in paths)
    for line in cases:
        m = LINE.fullmatch(line)
        assert m and int(m.group(4)) > 0, line
        # the Scala reference stands beside the uncompressed 100 B figures only
        assert bool(m.group(7)) == (m.group(2) == "none"), line
    assert active_decoder() == before
