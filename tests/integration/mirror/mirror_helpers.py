"""Helpers of the mirror integration tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from fixtures.waiting import wait_until

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
    """Write ``payloads`` to the 0.7 cluster in sets of ``chunk`` (one set -> one partition).

    Returns once the broker confirmed every set *and* a broker registered the topic in
    ZooKeeper: a dev broker registers a new topic after storing its first set, so a test
    reading the topic's partitions (`log_ends`) right after a first produce could otherwise
    see none -- and then wait for a mirror to commit "nothing".
    """
    from zkconsumer.zk.registry import read_partition_names

    with Producer(zk_connect=zk_connect, compression_codec=codec, confirm=True,
                  partitioner="round-robin") as producer:
        for i in range(0, len(payloads), chunk):
            producer.send(topic, payloads[i:i + chunk], key=key)
    with ZkSession(zk_connect) as session:
        wait_until(lambda: read_partition_names(session, topic), timeout=30,
                   what=f"topic {topic} registered in ZooKeeper")


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
    """A real mirror engine (`Mirror`, `ExactlyOnceMirror` or the `Bridge`) running in a
    background thread."""

    def __init__(self, mirror: Mirror | Any) -> None:
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


class MirrorProcesses:
    """``zkconsumer mirror ARGS`` subprocesses by name: launched, killed with -9 at random
    moments and launched again, stopped with SIGTERM; each launch logs to its own file."""

    def __init__(self, args: list[str], log_dir: Path) -> None:
        self.args = args
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.launches = Counter[str]()

    def log(self, name: str) -> Path:
        return self.log_dir / f"{name}-{self.launches[name]}.log"

    def launch(self, name: str) -> None:
        self.launches[name] += 1
        self.procs[name] = mirror_subprocess([*self.args, "--set", f"consumerid={name}"],
                                             self.log(name))

    def kill_at_random(self, rng: random.Random, kills: int,
                       pause: tuple[float, float]) -> None:
        """Kill -9 the processes in turn, each at a random moment, and relaunch it."""
        names = sorted(self.procs)
        for kill in range(kills):
            victim = names[kill % len(names)]
            time.sleep(rng.uniform(*pause))  # the random moment itself (not a wait)
            self.procs[victim].send_signal(signal.SIGKILL)
            assert self.procs[victim].wait(10) == -signal.SIGKILL
            self.launch(victim)

    def stop(self, timeout: float) -> None:
        """SIGTERM every process; each must exit 0 (its log tail says why not)."""
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for name, proc in self.procs.items():
            assert proc.wait(timeout) == 0, self.log(name).read_text()[-3000:]

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
