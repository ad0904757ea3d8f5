"""``zkconsumer bench codec`` through the real CLI dispatcher (tiny run, output format)."""

from __future__ import annotations

import re

import pytest

from zkconsumer import cli
from zkconsumer.bench import cli as bench_cli
from zkconsumer.protocol import accel, active_decoder

LINE = re.compile(r"^(decode|batch|encode) (none|gzip|snappy) (100B|1KiB) (compiled|pure): "
                  r"\d+ msg/s \(\d+\.\d MB/s, \d+\.\d{3} CPU s/M msg\)$")


def _figures(out: str) -> list[str]:
    return [line for line in out.splitlines() if not line.startswith("#")]


def test_bench_codec_prints_one_line_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["bench", "codec", "--seconds", "0", "--messages", "20", "--batch", "7"])
    out = capsys.readouterr().out
    lines = _figures(out)
    assert status == 0
    assert out.startswith(f"# decoder: {accel.IMPLEMENTATION}")
    assert all(LINE.match(line) for line in lines), lines
    paths = ["compiled", "pure"] if accel.speedups is not None else ["pure"]
    assert sorted(line.split(":")[0] for line in lines) == sorted(
        [f"{op} {codec} {size} {path}" for op in ("decode", "batch") for path in paths
         for codec in ("none", "gzip", "snappy") for size in ("100B", "1KiB")]
        + [f"encode {codec} {size} pure" for codec in ("none", "gzip", "snappy")
           for size in ("100B", "1KiB")])


def test_bench_codec_filters(capsys: pytest.CaptureFixture[str]) -> None:
    status = cli.main(["bench", "codec", "--seconds", "0", "--messages", "5", "--only",
                       "decode", "--codec", "snappy", "--size", "100", "--path", "pure"])
    assert status == 0
    out = _figures(capsys.readouterr().out)
    assert len(out) == 1
    assert out[0].startswith("decode snappy 100B pure: ")


def test_bench_codec_leaves_the_decoder_as_it_found_it(decoder: str) -> None:
    assert cli.main(["bench", "codec", "--seconds", "0", "--messages", "3", "--only", "batch",
                     "--codec", "none", "--size", "100"]) == 0
    assert active_decoder() == decoder


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
