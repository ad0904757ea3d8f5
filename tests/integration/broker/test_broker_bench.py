"""`zkconsumer bench broker` runs end to end (tiny volumes) and prints one line per case."""

from __future__ import annotations

import re

from zkconsumer.cli import main


def test_bench_broker_prints_every_case(capsys, tmp_path):
    status = main(["bench", "broker", "--in-process", "--produce-mb", "0.2", "--fetch-mb", "2",
                   "--rounds", "1", "--partitions", "2", "--dir", str(tmp_path / "logs")])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    cases = [line for line in out if not line.startswith("#")]
    names = [line.split(":")[0] for line in cases]
    assert names == ["produce 100B", "produce 1KiB",
                     "fetch 100B max 4096KiB", "multifetch 100B max 4096KiB",
                     "fetch 1KiB max 4096KiB", "multifetch 1KiB max 4096KiB"]
    for line in cases:
        m = re.fullmatch(r"[^:]+: (\d+) msg/s \((\d+\.\d) MB/s\)", line)
        assert m and int(m.group(1)) > 0 and float(m.group(2)) > 0, line
