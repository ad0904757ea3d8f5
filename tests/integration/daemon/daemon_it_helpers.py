"""Helpers for daemon integration tests: ``zkconsumer run`` subprocesses, producing, offsets.

Everything is real: the daemon runs as ``python -m zkconsumer run`` (so signals and
``kill -9`` act on a real process), brokers are dev brokers from the fixtures, ZooKeeper is
the test server with a per-test chroot.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.producer import Producer

REPO = Path(__file__).resolve().parents[3]


def env_with_repo(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


class DaemonProcess:
    """One ``zkconsumer run`` subprocess with its stderr in ``<tmp>/<name>.log``."""

    def __init__(self, tmp_path: Path, zk_connect: str, group: str, args: Sequence[str], *,
                 name: str = "daemon", env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.argv = [sys.executable, "-m", "zkconsumer", "run", "--zk", zk_connect,
                     "--group", group, "--shutdown-timeout", "5", *args]
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self._log,
                                     cwd=str(cwd or REPO), env=env or env_with_repo())

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def consumer_id(self) -> str:
        def find() -> str | None:
            m = re.search(r"starting member of group \S+ \((\S+)\)", self.log)
            return m.group(1) if m else None
        return wait_until(find, what="daemon start line")

    def wait_stable(self, timeout: float = 20.0) -> None:
        wait_until(lambda: "consumer state STABLE" in self.log or self.proc.poll() is not None,
                   timeout=timeout, what="daemon rebalanced")
        assert self.proc.poll() is None, self.log

    def send_signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._log.close()


def produce(zk_connect: str, topic: str, values: Sequence[bytes], chunk: int = 50) -> None:
    """Send ``values`` with the ZooKeeper-aware producer (sync), ``chunk`` per request."""
    with Producer(zk_connect=zk_connect) as producer:
        for i in range(0, len(values), chunk):
            producer.send(topic, list(values[i:i + chunk]))


def values(prefix: str, n: int, start: int = 0) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(start, start + n)]


def read_lines(path: Path) -> list[bytes]:
    """Complete lines of ``path`` (a line still being written is left out)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return data[:data.rfind(b"\n") + 1].splitlines()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_lines(path)]


def committed(zk: KazooClient, group: str, topic: str) -> dict[str, int]:
    base = f"/consumers/{group}/offsets/{topic}"
    if not zk.exists(base):
        return {}
    return {p: int(zk.get(f"{base}/{p}")[0]) for p in zk.get_children(base)}


def log_ends(brokers: Sequence[Any], topic: str) -> dict[str, int]:
    """``{"B-P": latest offset}`` for every partition the brokers registered for ``topic``."""
    out = {}
    for b in brokers:
        consumer = SimpleConsumer(b.host, b.port)
        try:
            for p in range(b.config.partitions_for(topic)):
                out[f"{b.broker_id}-{p}"] = consumer.latest_offset(topic, p)
        finally:
            consumer.close()
    return out


def duplicates(items: Sequence[bytes]) -> int:
    return sum(n - 1 for n in Counter(items).values())
