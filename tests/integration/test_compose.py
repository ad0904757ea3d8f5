"""compose/: the file is valid for docker-compose, and its commands are real zkconsumer commands.

Docker cannot run here, so the file is checked the two ways that catch real mistakes: Debian's
``docker-compose config`` validates and normalises it, and every ``zkconsumer`` command in it
is parsed by zkconsumer's own argparse parser (a renamed flag breaks this test, not a demo).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zkconsumer.broker.cli import build_config
from zkconsumer.cli import build_parser

COMPOSE_DIR = Path(__file__).resolve().parents[2] / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"


def _docker_compose() -> str:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.fail("docker-compose is not installed (bash .ci/setup installs it)")
    return exe


def _yaml_to_data(text: str) -> Any:
    """Parse YAML with PyYAML, or with the interpreter that runs docker-compose (which
    depends on PyYAML) when this environment lacks it."""
    try:
        import yaml
    except ImportError:
        exe = _docker_compose()
        interpreter = Path(exe).read_text(errors="replace").splitlines()[0].lstrip("#!").split()
        out = subprocess.run(
            [*interpreter, "-c",
             "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"],
            input=text, capture_output=True, text=True, check=True, timeout=60)
        return json.loads(out.stdout)
    return yaml.safe_load(text)


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    proc = subprocess.run([_docker_compose(), "-f", str(COMPOSE_FILE), "config"],
                          capture_output=True, text=True, timeout=120, cwd=COMPOSE_DIR)
    assert proc.returncode == 0, proc.stderr
    data = _yaml_to_data(proc.stdout)
    assert isinstance(data, dict)
    return data


def test_services(config):
    assert set(config["services"]) == {"zookeeper", "broker0", "broker1", "consumer"}
    assert config["services"]["zookeeper"]["image"].startswith("zookeeper:3.")
    for name in ("broker0", "broker1", "consumer"):
        svc = config["services"][name]
        assert svc["image"] == "zkconsumer:dev"
        assert Path(svc["build"]["context"]).resolve() == COMPOSE_DIR.parent
        assert (Path(svc["build"]["context"]) / svc["build"]["dockerfile"]).is_file()


def _published(svc: dict[str, Any]) -> dict[int, int]:
    """container port -> host port."""
    return {int(p["target"]): int(p["published"]) for p in svc.get("ports", [])}


def _mount_targets(svc: dict[str, Any]) -> set[str]:
    """Container paths of the service's volumes (short "src:dst[:mode]" or long syntax)."""
    return {v.split(":")[1] if isinstance(v, str) else v["target"]
            for v in svc.get("volumes", [])}


def test_broker_commands_parse_and_match_ports_and_zookeeper(config):
    parser = build_parser()
    zk_port = next(iter(_published(config["services"]["zookeeper"])))
    assert zk_port == 2181
    seen_ids, host_ports = set(), set()
    for name in ("broker0", "broker1"):
        svc = config["services"][name]
        command = svc["command"]
        assert command[:2] == ["zkconsumer", "broker"]
        args = parser.parse_args(command[1:])
        assert args._main.__module__ == "zkconsumer.broker.cli"
        broker = build_config(args)
        assert broker.host == name  # advertised name = the service's DNS name
        assert broker.zk_connect == f"zookeeper:{zk_port}"
        assert "zookeeper" in svc["depends_on"]
        assert broker.port in _published(svc)  # the listening port is published
        assert broker.log_dir.startswith("/data/")  # on the volume
        assert "/data" in _mount_targets(svc)
        seen_ids.add(broker.broker_id)
        host_ports.add(_published(svc)[broker.port])
    assert seen_ids == {0, 1}
    assert len(host_ports) == 2


def test_consumer_command_is_a_zkconsumer_run(config):
    svc = config["services"]["consumer"]
    command = svc["command"]
    assert command[:2] == ["zkconsumer", "run"]
    assert "--zk" in command and command[command.index("--zk") + 1] == "zookeeper:2181"
    assert set(svc["depends_on"]) >= {"broker0", "broker1"}
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    if "run" in commands:  # once the daemon command exists, its flags must parse too
        args = parser.parse_args(command[1:])
        assert args._main.__module__ == "zkconsumer.daemon.cli"


def test_dockerfile_installs_the_package_with_the_console_script():
    text = (COMPOSE_DIR / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11-slim" in text
    assert "COPY zkconsumer ./zkconsumer" in text and "pip install ." in text
    pyproject = (COMPOSE_DIR.parent / "pyproject.toml").read_text()
    assert 'zkconsumer = "zkconsumer.cli:main"' in pyproject  # what `zkconsumer ...` runs
    assert sys.version_info >= (3, 10)
