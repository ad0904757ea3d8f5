"""docs/zkconsumer.service: its ExecStart is a valid ``zkconsumer run`` command line."""

from __future__ import annotations

import shlex
from pathlib import Path

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
