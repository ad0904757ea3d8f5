"""The ZooKeeper launcher: a real server starts, answers, honours short sessions, stops."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until

from zkconsumer.devcluster.zookeeper import (
    ZooKeeperInstall,
    ZooKeeperServer,
    find_zookeeper,
    four_letter_word,
)
from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.session import ZkSession


def test_shared_server_answers_and_allows_short_sessions(zk_server: Any) -> None:
    assert four_letter_word(zk_server.host, zk_server.port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(zk_server.host, zk_server.port, "srvr")
    with ZkSession(zk_server.connect_string, session_timeout_ms=1000) as s:
        # the server's view of our connection: negotiated 1000 ms, not clamped to the stock
        # 2 x tickTime = 4000 ms minimum
        cons = four_letter_word(zk_server.host, zk_server.port, "cons")
        line = next(x for x in cons.splitlines() if f"sid=0x{s.session_id:x}," in x)
        assert ",to=1000," in line


def test_own_server_lifecycle(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        assert server.is_running() and server.port > 0
        assert server.connect_string == f"127.0.0.1:{server.port}"
        assert (tmp_path / "zk" / "zoo.cfg").read_text().count("clientPortAddress=127.0.0.1") == 1
        with ZkSession(server.connect_string) as s:
            s.update_persistent("/x", b"1")
        assert server.start() is server  # idempotent while running
        assert server.log_file.exists()
    assert not server.is_running()
    server.stop()  # idempotent


def test_start_failure_reports_the_log(tmp_path: Path) -> None:
    java = shutil.which("java")
    assert java, "java is required by the ZooKeeper tests"
    broken = ZooKeeperInstall(java, (str(tmp_path / "no-such.jar"),))
    server = ZooKeeperServer(tmp_path / "zk", install=broken, start_timeout=20)
    with pytest.raises(ZooKeeperError, match="exited with status") as err:
        server.start()
    assert "ZooKeeperServerMain" in str(err.value)  # the JVM's "could not find main class"
    assert not server.is_running()


def test_find_zookeeper_explains_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    install = find_zookeeper()
    assert any(p.endswith("zookeeper.jar") for p in install.classpath)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("ZKCONSUMER_JAVA", raising=False)
    with pytest.raises(ZooKeeperError, match="apt-get install -y zookeeper"):
        find_zookeeper()


def test_a_taken_port_is_not_mistaken_for_our_server(zk_server: Any, tmp_path: Path) -> None:
    # another ZooKeeper answers "imok" on that port, but it is not ours (other dataDir)
    server = ZooKeeperServer(tmp_path / "zk", port=zk_server.port)
    with pytest.raises(ZooKeeperError, match="is already in use"):
        server.start()
    assert not server.is_running()
    assert four_letter_word(zk_server.host, zk_server.port, "ruok") == "imok"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    # a test run killed hard must not leave an orphan JVM behind
    script = (
        "import os, sys\n"
        "from zkconsumer.devcluster.zookeeper import ZooKeeperServer\n"
        f"s = ZooKeeperServer({str(tmp_path / 'zk')!r}).start()\n"
        "print(s.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=60, check=True)
    pid = int(out.stdout.strip())
    wait_until(lambda: not _alive(pid), timeout=20, what=f"orphaned ZooKeeper {pid} to exit")
