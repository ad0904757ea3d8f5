"""``zkconsumer dev-cluster --zk-tls --zk-sasl``: the printed flags are all a client needs."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.waiting import wait_until
from security_helpers import REPO, Cli, env_with_repo

pytestmark = pytest.mark.slow


def test_secured_dev_cluster_prints_working_client_flags(tmp_path: Path) -> None:
    out_path = tmp_path / "dev-cluster.out"
    with open(out_path, "wb") as out, open(tmp_path / "dev-cluster.log", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zkconsumer", "dev-cluster", "--dir", str(tmp_path / "dc"),
             "--brokers", "1", "--zk-tls", "--zk-sasl"],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL, cwd=str(REPO),
            env=env_with_repo())
    try:
        lines = wait_until(lambda: dict(line.split(": ", 1) for line in
                                        out_path.read_text().splitlines())
                           if "zk-client-flags: " in out_path.read_text() else None,
                           timeout=90, what="dev cluster up")
        flags = shlex.split(lines["zk-client-flags"])
        password = (tmp_path / "dc" / "zookeeper" / "sasl-password").read_text().strip()
        assert password not in " ".join(flags) and "--zk-password-file" in flags
        cli = Cli(tmp_path)
        secure = lines["zookeeper-tls"]
        done = cli.run("produce", ["produce", "--zk", secure, "--topic", "t", *flags],
                       stdin="a\nb\n")
        assert done.returncode == 0, done.stderr
        done = cli.run("list", ["group", "list", "--zk", secure, *flags])
        assert done.returncode == 0, done.stderr
        # the plain port still asks for SASL: the flags minus the TLS files work there
        sasl_only = flags[flags.index("--zk-sasl-user"):]
        done = cli.run("plain", ["group", "list", "--zk", lines["zookeeper"], *sasl_only])
        assert done.returncode == 0, done.stderr
        done = cli.run("anonymous", ["group", "list", "--zk", lines["zookeeper"]])
        assert done.returncode == 1 and "requires SASL" in done.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, (tmp_path / "dev-cluster.log").read_text()
