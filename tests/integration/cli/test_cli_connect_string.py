"""Connect-string mistakes are one clear line, exit 1, from every command (issue 11).

A chroot that does not exist (``--zk host:port/nope``) used to give ``run`` "parent vanished
while creating" plus a raw kazoo ``UserWarning`` (breaking ``--log-format json``),
``produce`` "no live broker" and ``group list`` an empty, successful answer.  An
unresolvable host used to wait out the connection timeout and say "Connection time-out".
The check lives in `ZkSession.start`, so every command gets it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.session import ZkSession

ROOT = Path(__file__).resolve().parents[3]


def _zkconsumer(*argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "zkconsumer", *argv], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=60)


def _missing_chroot(zk_server: Any) -> tuple[str, str]:
    chroot = f"/zkc-missing-{time.monotonic_ns()}"
    return f"{zk_server.connect_string}{chroot}", chroot


def test_session_refuses_a_missing_chroot(zk_server: Any) -> None:
    connect, chroot = _missing_chroot(zk_server)
    with pytest.raises(ZooKeeperError) as info:
        ZkSession(connect).start()
    assert str(info.value) == (f"ZooKeeper chroot {chroot} does not exist on "
                               f"{zk_server.connect_string} (create it, or fix --zk / "
                               "zk.connect)")


def test_session_accepts_an_existing_chroot(zk_connect: str) -> None:
    with ZkSession(zk_connect) as session:
        assert session.chroot == "/" + zk_connect.split("/", 1)[1]


@pytest.mark.parametrize("argv", [
    ["group", "list", "--zk"],
    ["group", "describe", "--group", "g", "--zk"],
    ["offsets", "export", "--zk"],
    ["produce", "--topic", "t", "--zk"],
    ["run", "--group", "g", "--topic", "t", "--output", "-", "--log-format", "json", "--zk"],
], ids=lambda a: " ".join(a[:2]))
def test_missing_chroot_is_one_line_from_every_command(zk_server: Any, argv: list[str]) -> None:
    connect, chroot = _missing_chroot(zk_server)
    proc = _zkconsumer(*argv, connect, stdin="x\n")
    assert proc.returncode == 1, proc.stderr
    error = (f"zkconsumer {argv[0]}: error: ZooKeeper chroot {chroot} does not exist on "
             f"{zk_server.connect_string} (create it, or fix --zk / zk.connect)")
    lines = proc.stderr.splitlines()
    assert "Warning" not in proc.stderr
    if argv[0] == "run":  # --log-format json: every stderr line, the fatal one too, is JSON
        records = [json.loads(line) for line in lines]
        assert records[-1]["message"] == error
        assert records[-1]["event"] == "fatal_error"
    else:
        assert lines == [error]
    assert proc.stdout == ""


@pytest.mark.parametrize("argv", [["group", "list", "--zk"],
                                  ["run", "--group", "g", "--topic", "t", "--output", "-", "--zk"]],
                         ids=lambda a: a[0])
def test_unresolvable_host_is_said_at_once(argv: list[str]) -> None:
    connect = "nosuchhost.invalid:2181/kafka"
    started = time.monotonic()
    proc = _zkconsumer(*argv, connect)
    assert time.monotonic() - started < 5  # not the 6 s connection timeout
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"zkconsumer {argv[0]}: error: cannot connect to ZooKeeper at '{connect}': host "
        "'nosuchhost.invalid' does not resolve (Name or service not known); check the host "
        "name in --zk / zk.connect")
    assert "time-out" not in proc.stderr


def test_one_unresolvable_host_of_several_is_a_warning(zk_connect: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    servers, _, chroot = zk_connect.partition("/")
    with ZkSession(f"nosuchhost.invalid:2181,{servers}/{chroot}") as session:
        assert session.exists("/")
    assert "'nosuchhost.invalid'" in caplog.text and "do not resolve" in caplog.text


def test_head_of_group_describe_json_is_quiet(zk_connect: str, zk_client: Any) -> None:
    """``group describe --json | head``: exit 141, nothing on stderr (the dispatcher's
    SIGPIPE rule, seen with a report far larger than a pipe buffer)."""
    tx = zk_client.transaction()
    zk_client.ensure_path("/consumers/g/offsets/t")
    for p in range(600):  # ~100 KB of JSON: more than a pipe buffer
        tx.create(f"/consumers/g/offsets/t/0-{p}", b"0")
    assert all(r is not None and not isinstance(r, Exception) for r in tx.commit())
    proc = subprocess.Popen([sys.executable, "-m", "zkconsumer", "group", "describe", "--zk",
                             zk_connect, "--group", "g", "--json", "--no-log-end"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"{\n"
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141
    assert err == b""
