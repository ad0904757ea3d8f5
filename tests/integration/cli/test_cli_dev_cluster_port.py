"""``zkconsumer dev-cluster`` with its ZooKeeper port taken says so in one line (issue 11).

It used to start the JVM anyway and print the last 30 lines of ZooKeeper's log (a Java
``BindException`` stack trace).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.errors import ZooKeeperError

ROOT = Path(__file__).resolve().parents[3]


def _listening() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_dev_cluster_with_its_zookeeper_port_taken(tmp_path: Path) -> None:
    with _listening() as taken:
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "zkconsumer", "dev-cluster", "--dir",
                               str(tmp_path / "dc"), "--zk-port", str(port)], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"zkconsumer dev-cluster: error: ZooKeeper port {port} is already in use on 127.0.0.1 "
        "(stop what listens there, or pick another port)"]
    assert proc.stdout == ""


def test_server_with_a_taken_port_does_not_start_java(tmp_path: Path) -> None:
    with _listening() as taken:
        server = ZooKeeperServer(tmp_path / "zk", port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperError, match="is already in use"):
            server.start()
    assert server.pid is None
    assert not server.log_file.exists()
