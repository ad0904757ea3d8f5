"""Running ``zkconsumer`` commands as real subprocesses for the security tests.

Each command's stderr goes to ``<tmp>/<name>.log`` so that `assert_no_secret` can grep every
log a test produced; the argv is kept too (a password must not be visible in ``ps``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.security_config import zk_security_flags
from zkconsumer.zk.session import ZkSession

REPO = Path(__file__).resolve().parents[3]

MODES = ("mixed", "tls", "sasl", "digest")
ALICE_PASSWORD = "alice-" + uuid.uuid4().hex  # unique: a grep for it cannot match by chance
BOB_PASSWORD = "bob-" + uuid.uuid4().hex


@dataclass
class SecureEnv:
    """One test's view of a secured ensemble (everything below its own chroot)."""

    mode: str
    server: ZooKeeperServer
    chroot: str
    zk: str                      # what zkconsumer connects to (TLS port where there is one)
    security: ZkSecurity         # zkconsumer's settings for ``zk``
    broker_zk: str               # what the 0.7 brokers connect to (plain port unless TLS-only)
    broker_security: ZkSecurity
    plain_zk: str | None         # the plain port (Scala-style members), None if TLS-only
    password_file: Path | None
    secrets: list[str] = field(default_factory=list)

    @property
    def flags(self) -> list[str]:
        return zk_security_flags(self.security)

    def session(self, security: ZkSecurity | None = None, zk: str | None = None) -> ZkSession:
        return ZkSession(zk or self.zk, security=security or self.security).start()




def env_with_repo(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ZKCONSUMER_ZK_PASSWORD", None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


class Cli:
    """Runs ``python -m zkconsumer ...`` and remembers every argv and log it produced."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.argvs: list[list[str]] = []
        self._n = 0

    def _log(self, name: str) -> Path:
        self._n += 1
        return self.tmp_path / f"{self._n:02d}-{name}.log"

    def run(self, name: str, argv: Sequence[str], *, stdin: str = "", timeout: float = 120,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        full = [sys.executable, "-m", "zkconsumer", *argv]
        self.argvs.append(full)
        proc = subprocess.run(full, input=stdin, capture_output=True, text=True,
                              timeout=timeout, cwd=str(REPO), env=env or env_with_repo())
        self._log(name).write_text(proc.stdout + proc.stderr)
        return proc

    def start(self, name: str, argv: Sequence[str], *,
              env: dict[str, str] | None = None) -> Background:
        full = [sys.executable, "-m", "zkconsumer", *argv]
        self.argvs.append(full)
        return Background(full, self._log(name), env or env_with_repo())

    def logs(self) -> list[Path]:
        return sorted(self.tmp_path.glob("*.log"))


class Background:
    """A long-running command (``run``, ``mirror``) with its stderr in a log file."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=str(REPO), env=env)

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()


def jsonl_values(path: Path) -> list[str]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            out.append(json.loads(line)["value"])
    return out


def one_line_error(proc: subprocess.CompletedProcess[str], command: str) -> str:
    """The command failed with exactly one line on stderr, ``zkconsumer CMD: error: ...``."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"zkconsumer {command}: error: "), lines[0]
    return lines[0]


def assert_no_secret(secrets: Iterable[str], texts: Iterable[tuple[str, str]]) -> None:
    """No secret in any (name, text): logs, argv, error messages."""
    for name, text in texts:
        for secret in secrets:
            assert secret not in text, f"secret found in {name}"
