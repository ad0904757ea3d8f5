"""docs/zkconsumer.service and zkconsumer@.service: valid units with valid ``zkconsumer run``
command lines, and the systemd recipe of docs/operations.md works as written."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.cli import build_parser
from zkconsumer.daemon.config import build_config

UNIT = Path(__file__).resolve().parents[3] / "docs" / "zkconsumer.service"


def _directives() -> dict[str, str]:
    text = UNIT.read_text().replace("\\\n", " ")
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_exec_start_parses_and_validates(tmp_path: Path) -> None:
    d = _directives()
    argv = shlex.split(d["ExecStart"])
    assert argv[0].endswith("/zkconsumer") and argv[1] == "run"
    # the unit's config file does not exist here: stand in a minimal one
    props = tmp_path / "consumer.properties"
    props.write_text("zk.connect=zk1:2181\ngroupid=events-indexer\n")
    argv = [str(props) if a == "/etc/zkconsumer/consumer.properties" else a for a in argv]
    args = build_parser().parse_args(argv[1:])
    assert args._main.__module__ == "zkconsumer.daemon.cli"
    cfg = build_config(args)
    assert cfg.sink == "output" and cfg.format == "jsonl" and cfg.metrics_port == 9100
    assert d["KillSignal"] == "SIGTERM" and d["KillMode"] == "mixed"
    # systemd must wait longer than the daemon's own graceful-stop bound
    assert float(d["TimeoutStopSec"]) > cfg.shutdown_timeout
    assert d["ExecReload"] == "/bin/kill -HUP $MAINPID"


# -- issue 22 item 10: the recipe of docs/operations.md, as written ----------------------------

TEMPLATE = UNIT.with_name("zkconsumer@.service")
OPERATIONS = UNIT.with_name("operations.md")
VENV_ZKCONSUMER = Path(sys.executable).with_name("zkconsumer")


def _systemd_section() -> str:
    text = OPERATIONS.read_text()
    start = text.index("\n## Running under systemd\n")
    return text[start:text.index("\n## ", start + 1)]


def _recipe_lines(prefix: str) -> list[list[str]]:
    """The shell commands of the section starting with ``prefix`` (``sudo`` dropped)."""
    out = []
    for line in _systemd_section().splitlines():
        if line.startswith(prefix):
            argv = shlex.split(line)
            out.append(argv[1:] if argv[0] == "sudo" else argv)
    return out


@pytest.mark.parametrize("unit", [UNIT, TEMPLATE], ids=lambda p: p.name)
def test_units_pass_systemd_analyze_verify(tmp_path: Path, unit: Path) -> None:
    # the binary must exist for systemd: point ExecStart at this checkout's
    name = "zkconsumer@a.service" if "@" in unit.name else unit.name
    copy = tmp_path / name
    copy.write_text(unit.read_text().replace("/opt/zkconsumer/bin/zkconsumer",
                                             str(VENV_ZKCONSUMER)))
    proc = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_the_recipe_creates_the_working_directory_the_unit_needs(tmp_path: Path) -> None:
    """The user and directory steps, run against a temporary root (``useradd --prefix``;
    as root -- the recipe runs them with sudo -- else only the directory step)."""
    work_dir = _directives()["WorkingDirectory"]
    assert _directives()["StateDirectory"] == "zkconsumer" and work_dir == "/var/lib/zkconsumer"
    (useradd,) = _recipe_lines("sudo useradd")
    home = useradd[useradd.index("--home-dir") + 1]
    assert home == work_dir and useradd[-1] == "zkconsumer"
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    for name in ("passwd", "group", "shadow", "gshadow"):
        (root / "etc" / name).touch()
    owner: dict[str, str] = {}
    if os.geteuid() == 0:
        subprocess.run([useradd[0], "--prefix", str(root), *useradd[1:]], check=True,
                       timeout=60)
        entry = next(line.split(":") for line in (root / "etc" / "passwd").read_text()
                     .splitlines() if line.startswith("zkconsumer:"))
        assert entry[5] == work_dir  # the home it names ...
        assert not (root / work_dir.lstrip("/")).exists()  # ... is not created by useradd
        owner = {"zkconsumer": entry[2]}
    for install in _recipe_lines("sudo install -d"):
        argv = [a for a in install if a != "sudo"]
        fixed: list[str] = []
        for i, arg in enumerate(argv):
            if argv[i - 1] in ("-o", "-g"):
                fixed.append(owner.get(arg, "") if owner else "")
            elif arg.startswith("/"):
                fixed.append(str(root / arg.lstrip("/")))
            else:
                fixed.append(arg)
        if not owner:  # not root: no chown
            fixed = [a for i, a in enumerate(fixed)
                     if a not in ("-o", "-g") and fixed[i - 1] not in ("-o", "-g")]
        subprocess.run(fixed, check=True, timeout=60)
    made = root / work_dir.lstrip("/")
    assert made.is_dir()
    if owner:
        assert str(made.stat().st_uid) == owner["zkconsumer"]


def _template_argv(instance: str, env: dict[str, str]) -> list[str]:
    text = TEMPLATE.read_text().replace("\\\n", " ").replace("%i", instance)
    line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    for key, value in env.items():
        line = line.replace("${" + key + "}", value)
    return shlex.split(line.partition("=")[2])


def test_template_instances_get_their_own_metrics_port_and_output(tmp_path: Path) -> None:
    envs = {}
    for argv in _recipe_lines("echo METRICS_PORT="):  # echo METRICS_PORT=9101 | sudo tee ...
        envs[Path(argv[-1]).stem] = {"METRICS_PORT": argv[1].partition("=")[2]}
    assert sorted(envs) == ["a", "b"]
    props = tmp_path / "consumer.properties"
    props.write_text("zk.connect=zk1:2181\ngroupid=events-indexer\n")
    configs = []
    for instance, env in envs.items():
        argv = [str(props) if a == "/etc/zkconsumer/consumer.properties" else a
                for a in _template_argv(instance, env)]
        configs.append(build_config(build_parser().parse_args(argv[1:])))
    assert len({c.metrics_port for c in configs}) == len({c.target for c in configs}) == 2


def test_a_taken_metrics_port_is_named_in_the_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "zkconsumer", "run", "--zk", "127.0.0.1:1", "--group", "g",
             "--topic", "t", "--output", "-", "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=120, cwd=UNIT.parents[1])
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"zkconsumer run: error: --metrics-port: cannot listen on 127.0.0.1:{port} for "
        "/metrics and /healthz: Address already in use (another process uses it: give every "
        "instance its own --metrics-port)")
