"""CLI error paths against a real ZooKeeper: one line ``zkconsumer X: error: ...``, exit 1.

An unreachable ``--zk`` must fail within the bounded connection timeout with that one line,
not kazoo's screenful of "Connection dropped" warnings; a group or file that does not exist
must be an error, not an empty report that looks healthy.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from zkconsumer.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _error_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_unreachable_zk_is_one_line_within_the_timeout() -> None:
    zk = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "group", "list", "--zk", zk],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"zkconsumer group: error: cannot connect to ZooKeeper at '{zk}' within 6000 ms: "
        "Connection time-out"]


def test_describe_unknown_group(zk_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["group", "describe", "--zk", zk_connect, "--group", "nosuch"]) == 1
    assert _error_lines(capsys) == [
        f"zkconsumer group: error: no consumer group 'nosuch' in ZooKeeper at {zk_connect} "
        "(no /consumers/nosuch; `zkconsumer group list` shows the groups)"]


def test_export_unknown_group(zk_connect: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offsets", "export", "--zk", zk_connect, "--group", "nosuch"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("zkconsumer offsets: error: no consumer group 'nosuch'")


def test_export_to_unwritable_file(zk_connect: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing-dir" / "offsets.txt"
    assert main(["offsets", "export", "--zk", zk_connect, "--output", str(target)]) == 1
    assert _error_lines(capsys) == [
        f"zkconsumer offsets: error: {target}: No such file or directory"]


def test_reset_to_neither_keyword_nor_file(zk_connect: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic", "t",
                 "--to", "5"]) == 1
    assert _error_lines(capsys) == [
        "zkconsumer offsets: error: --to '5': expected earliest, latest or an offsets file, "
        "and there is no such file"]


@pytest.mark.parametrize("content,detail", [
    ("garbage\n", "not /consumers/<group>/offsets/<topic>/<B-P>:<offset>"),
    ("/consumers/g/offsets/t/0-0:abc\n", "offset 'abc' is not a non-negative integer"),
    ("{", "invalid JSON"),
])
def test_import_malformed_file(zk_connect: str, tmp_path: Path, content: str, detail: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "offsets.txt"
    path.write_text(content)
    assert main(["offsets", "import", "--zk", zk_connect, str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zkconsumer offsets: error: ") and detail in err
    assert "Traceback" not in err
