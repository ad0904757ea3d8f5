"""The ``zkconsumer`` front door without servers: help texts, flag names, error lines.

Every error a user can cause must end as one line ``zkconsumer COMMAND: error: ...`` and a
non-zero exit status, never a traceback (a traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[3]


def _children(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and nested sub-command we own (not single benchmarks)."""
    out = []
    for name, parser in _children(build_parser()).items():
        out.append((name, parser))
        if name != "bench":
            out += [(f"{name} {sub}", p) for sub, p in _children(parser).items()]
    return out


@pytest.mark.parametrize("name", [name for name, _ in _commands()])
def test_every_help_has_examples_and_exit_status(name: str) -> None:
    parser = dict(_commands())[name]
    text = parser.format_help()
    assert "example" in text, name
    if not _children(parser) or name in ("offsets", "mirror", "bench"):  # those run, too
        assert "exit status" in text, name
    assert "--debug" in text  # accepted after the command, too


def test_zk_flag_is_spelled_and_shown_the_same_everywhere() -> None:
    seen = {}
    for name, parser in _commands():
        for action in parser._actions:
            if "--zk" in action.option_strings:
                seen[name] = (action.metavar, "zk.connect" in (action.help or ""))
    assert len(seen) >= 8, seen
    assert set(seen.values()) == {("HOST:PORT[,...][/chroot]", True)}, seen


def test_same_thing_same_flag_name() -> None:
    cmds = dict(_commands())
    # --set KEY=VALUE overrides a property everywhere (the broker keeps --property too)
    for name in ("run", "produce", "mirror", "broker"):
        assert "--set" in cmds[name]._option_string_actions, name
    broker = build_parser().parse_args(["broker", "--set", "a=1", "--property", "b=2"])
    assert broker.property == ["a=1", "b=2"]
    # --streams N as in `run` (mirror keeps --num-streams)
    for argv in (["mirror", "--streams", "3"], ["mirror", "--num-streams", "3"]):
        assert build_parser().parse_args(argv).num_streams == 3
    # --broker-list ID:HOST:PORT,... as in `produce` (export keeps --brokers)
    for flag in ("--broker-list", "--brokers"):
        args = build_parser().parse_args(["export", flag, "0:h:1", "--topic", "t", "--to", "d"])
        assert args.brokers == "0:h:1"
    # --metrics-host beside --metrics-port
    for name in ("run", "mirror"):
        assert "--metrics-host" in cmds[name]._option_string_actions, name


def test_os_error_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    status = main(["dev-cluster", "--dir", str(blocker / "sub")])
    err = capsys.readouterr().err
    assert status == 1
    assert err.strip().splitlines() == [
        f"zkconsumer dev-cluster: error: {blocker / 'sub'}: Not a directory"]


def test_debug_after_the_command_shows_the_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError):
        main(["dev-cluster", "--dir", str(blocker / "sub"), "--debug"])
    with pytest.raises(NotADirectoryError):
        main(["--debug", "dev-cluster", "--dir", str(blocker / "sub")])


def test_produce_without_a_cluster_names_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["produce", "--topic", "t"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zkconsumer produce: error: give --zk ") and "--broker-list" in err


def test_export_without_topic_names_the_flags(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--zk", "127.0.0.1:1", "--to", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("zkconsumer export: error: give --topic") and "--pattern" in err


def test_fetch_bad_offset_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    # checked before any connection: the broker address is never used
    assert main(["fetch", "--broker", "127.0.0.1:1", "--topic", "t", "--offset", "-3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("zkconsumer fetch: error: ")


def test_missing_required_flag_is_argparse_status_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "group", "describe", "--zk",
                           "h:1"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == (
        "zkconsumer group describe: error: the following arguments are required: --group")
