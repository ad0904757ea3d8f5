"""``zkconsumer bench codec`` through the real CLI dispatcher (tiny run, output format)."""

from __future__ import annotations

import re

import pytest

from zkconsumer import cli
from zkconsumer.bench import cli as bench_cli

LINE = re.compile(r"^(decode|encode) (none|gzip|snappy) (100B|1KiB): \d+ msg/s \(\d+\.\d MB/s\)$")


def test_bench_codec_prints_one_line_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["bench", "codec", "--seconds", "0", "--messages", "20", "--batch", "7"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 0
    assert len(lines) == 12  # 2 ops x 3 codecs x 2 sizes
    assert all(LINE.match(line) for line in lines), lines
    assert {line.split(":")[0] for line in lines} == {
        f"{op} {codec} {size}" for op in ("decode", "encode")
        for codec in ("none", "gzip", "snappy") for size in ("100B", "1KiB")}


def test_bench_codec_filters(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["bench", "codec", "--seconds", "0", "--messages", "5", "--only",
                       "decode", "--codec", "snappy", "--size", "100"])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1
    assert out[0].startswith("decode snappy 100B: ")


def test_bench_without_a_name_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench"]) == 2
    assert "codec" in capsys.readouterr().out


def test_bench_discovers_only_written_modules() -> None:
    found = bench_cli.available()
    assert "codec" in found
    assert set(found) <= set(bench_cli.NAMES)
    for module in found.values():
        assert callable(module.main) and callable(module.configure) and module.HELP


def test_bench_skips_modules_that_cannot_be_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench_cli, "NAMES", ("codec", "not_written_yet"))
    assert list(bench_cli.available()) == ["codec"]
