"""Helpers of the mirror integration tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

from zkconsumer.mirror.engine import Mirror
from zkconsumer.producer.producer import Producer
from zkconsumer.protocol import Compression
from zkconsumer.zk.offsets import read_topic_offsets
from zkconsumer.zk.session import ZkSession

REPO = Path(__file__).resolve().parents[3]

#: Fast settings for tests: commit often, give up on an unreachable target quickly.
FAST_MIRROR = {"commit_interval_ms": 100, "retry_backoff_ms": 100,
               "retry_backoff_max_ms": 500, "shutdown_timeout_ms": 10000,
               "revoke_timeout_ms": 3000, "progress_interval_ms": 1000}
FAST_TARGET = {"request.timeout.ms": "500", "message.timeout.ms": "1500",
               "reconnect.backoff.max.ms": "200",
               "socket.connection.setup.timeout.ms": "1000"}


def produce(zk_connect: str, topic: str, payloads: list[bytes], *,
            codec: Compression = Compression.NONE, chunk: int = 50,
            key: str | None = None) -> None:
    """Write ``payloads`` to the 0.7 cluster in sets of ``chunk`` (one set -> one partition)."""
    with Producer(zk_connect=zk_connect, compression_codec=codec, confirm=True,
                  partitioner="round-robin") as producer:
        for i in range(0, len(payloads), chunk):
            producer.send(topic, payloads[i:i + chunk], key=key)


def committed(zk_connect: str, group: str, topic: str) -> dict[str, int]:
    with ZkSession(zk_connect) as session:
        return read_topic_offsets(session, group, topic)


def log_ends(zk_connect: str, topic: str) -> dict[str, int]:
    """``{"B-P": latest offset}`` of every partition of ``topic`` in the 0.7 cluster."""
    from zkconsumer.client import SimpleConsumer
    from zkconsumer.zk.registry import read_brokers, read_partition_names

    out: dict[str, int] = {}
    with ZkSession(zk_connect) as session:
        brokers = read_brokers(session)
        for name in read_partition_names(session, topic):
            b, p = (int(x) for x in name.split("-"))
            with SimpleConsumer(brokers[b].host, brokers[b].port) as c:
                out[name] = c.latest_offset(topic, p)
    return out


class MirrorThread:
    """A real `Mirror` (GroupConsumer + target client) running in a background thread."""

    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="test-mirror", daemon=True)

    def _run(self) -> None:
        try:
            self.mirror.run()
        except BaseException as exc:
            self.error = exc

    def start(self) -> MirrorThread:
        self._thread.start()
        return self

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 30.0) -> None:
        self.mirror.stop()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "mirror did not stop"
        if self.error is not None:
            raise self.error


def mirror_subprocess(args: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    """``python -m zkconsumer mirror ARGS`` with stderr to ``log_file``."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(log_file, "wb") as err:
        return subprocess.Popen([sys.executable, "-m", "zkconsumer", "--log-level", "INFO",
                                 "mirror", *args], stdout=subprocess.DEVNULL, stderr=err,
                                env=env, cwd=str(REPO))
