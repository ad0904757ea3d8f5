"""`zkconsumer bench group` and `zkconsumer bench daemon` end to end (tiny volumes, real dev
clusters): one line per codec and decoder path, each with msg/s, MB/s and CPU seconds per
million messages, and each decoder path really taken -- in the group consumer's fetcher
threads (switched in-process) and in the ``zkconsumer run`` subprocess (ZKCONSUMER_PURE=1)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest

from zkconsumer.bench import daemon as bench_daemon
from zkconsumer.bench import group as bench_group
from zkconsumer.bench.codec import decoder_path
from zkconsumer.cli import main
from zkconsumer.protocol import accel, active_decoder

CODECS = ("none", "gzip", "snappy")
PATHS = ["compiled", "pure"] if accel.speedups is not None else ["pure"]

GROUP_LINE = re.compile(
    r"group consume (messages|columns) 1 member 8 partitions 100B (none|gzip|snappy) "
    r"socket\.buffersize=65536 (compiled|pure): ([\d,]+) msg/s \(([\d,]+\.\d) MB/s, "
    r"(\d+\.\d\d) CPU s/M msg\)(  \[Scala 0\.7\.2 consumer: 4\.3 M msg/s\])?")
DAEMON_LINE = re.compile(
    r"(file lines|exec jsonl) 100B (none|gzip|snappy) (compiled|pure): (\d+) msg/s "
    r"\((\d+\.\d) MB/s, (\d+\.\d{3}) CPU s/M msg\) \[steady \d+ msg/s after \d+\.\d\ds "
    r"start-up\]")


class _CountingSpeedups:
    """Stands in for the compiled extension: counts its calls by the bench's current path."""

    def __init__(self, real: ModuleType, current: list[str]) -> None:
        self._real = real
        self._current = current
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[self._current[0]] += 1
            return attr(*args, **kwargs)

        return counted


def test_bench_group_consumes_every_codec_on_both_paths(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    before = active_decoder()
    current = ["none"]
    counting = None
    if accel.speedups is not None:
        counting = _CountingSpeedups(accel.speedups, current)
        monkeypatch.setattr(accel, "speedups", counting)

    @contextmanager
    def tracked_path(path: str) -> Iterator[None]:
        with decoder_path(path):
            current[0] = path
            try:
                yield
            finally:
                current[0] = "none"

    monkeypatch.setattr(bench_group, "decoder_path", tracked_path)
    status = main(["bench", "group", "--messages", "4000", "--size", "100B", "--skip-rebalance",
                   "--socket-buffer", "65536", "--wrap", "50"])
    assert status == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"# decoder: {accel.IMPLEMENTATION}") for line in out)
    cases = [line for line in out if not line.startswith("#")]
    assert sorted(line.split(":")[0] for line in cases) == sorted(
        f"group consume {api} 1 member 8 partitions 100B {codec} socket.buffersize=65536 {path}"
        for api in ("messages", "columns") for codec in CODECS for path in PATHS)
    for line in cases:
        m = GROUP_LINE.fullmatch(line)
        assert m, line
        assert int(m.group(4).replace(",", "")) > 0 and float(m.group(6)) > 0, line
        assert bool(m.group(7)) == (m.group(2) == "none"), line  # the Scala reference
    # the fetcher threads decoded on the path each case names: the compiled walk was called
    # during compiled cases only (pure cases never reached the extension)
    if counting is not None:
        assert counting.calls["compiled"] > 0, counting.calls
        assert counting.calls["pure"] == 0, counting.calls
    assert active_decoder() == before


def test_bench_daemon_runs_every_codec_on_both_paths(capsys: pytest.CaptureFixture[str]) -> None:
    # the bench checks that each zkconsumer run process ran the path its line names (the
    # extension mapped in its memory exactly on the compiled path): a mismatch is an error
    status = main(["bench", "daemon", "--messages", "3000", "--size", "100"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    out = captured.out.splitlines()
    assert any(line.startswith(f"# decoder: {accel.IMPLEMENTATION}") for line in out)
    cases = [line for line in out if not line.startswith("#")]
    assert sorted(line.split(":")[0] for line in cases) == sorted(
        f"{sink} 100B {codec} {path}" for sink in ("file lines", "exec jsonl")
        for codec in CODECS for path in PATHS)
    for line in cases:
        m = DAEMON_LINE.fullmatch(line)
        assert m, line
        assert int(m.group(4)) > 0 and float(m.group(6)) > 0, line


def test_bench_daemon_notices_a_pure_case_that_ran_compiled(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if accel.speedups is None:
        pytest.skip(f"needs the compiled decoder: {accel.REASON}")
    real_env = bench_daemon._env
    monkeypatch.setattr(bench_daemon, "_env", lambda path: real_env("compiled"))
    status = main(["bench", "daemon", "--messages", "1000", "--size", "100", "--sink", "file",
                   "--codec", "none", "--path", "pure"])
    assert status == 1
    assert "did not run the pure decoder" in capsys.readouterr().err
