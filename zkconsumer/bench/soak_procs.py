"""The soak's processes: its own ZooKeeper (behind a `TcpProxy`), dev brokers, group members.

Everything the soak breaks is a real process, so faults are real: ``kill -9`` and restart of
ZooKeeper on the same port and data directory (sessions survive a restart shorter than their
timeout, as in production), ``kill -9`` and restart of a dev broker on the same port and log
directory, and ``kill -9`` / SIGTERM / SIGSTOP+SIGCONT of ``zkconsumer run`` and
``zkconsumer mirror`` members.

Members connect to ZooKeeper through the proxy (so `TcpProxy.drop_all` cuts *their*
connections); brokers, the soak's producer and its observer connect directly.

Invariants: the soak owns its ZooKeeper (a restart never disturbs anything else); every
member writes what it consumed as jsonl (``topic``, ``partition``, ``offset``,
``next_offset``, ``value``) to its own file, whatever its sink (``--output``, ``--exec``
through `EXEC_CHILD`, ``--handler`` through `HANDLER_MODULE`); a restarted member keeps its
file; `SoakCluster.stop` reaps every process it started.  ZooKeeper is started and
restarted from the thread that calls `SoakCluster.start` (its death signal is tied to that
thread), so call every method from one long-lived thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import zkconsumer
from zkconsumer.bench.soak_proxy import TcpProxy
from zkconsumer.client.connection import BrokerConnection
from zkconsumer.client.produce import produce
from zkconsumer.devcluster.brokers import DevBrokerProcess
from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.errors import ZkConsumerError
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

__all__ = ["EXEC_CHILD", "HANDLER_MODULE", "Member", "MemberSpec", "SoakCluster",
           "SoakSettings"]

_METRICS_LINE = re.compile(r"metrics on http://[^:/]+:(\d+)/metrics")

#: ``--exec`` child: appends each jsonl line it reads to argv[1], fsyncs, then acknowledges.
EXEC_CHILD = """\
import os, sys
out = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
buf = b""
while True:
    chunk = os.read(0, 1 << 16)
    if not chunk:
        break
    buf += chunk
    *lines, buf = buf.split(b"\\n")
    if lines:
        os.write(out, b"".join(line + b"\\n" for line in lines))
        os.fsync(out)
        os.write(1, b"ack %d\\n" % len(lines))
"""

#: ``--handler soak_handler:handle``: one jsonl line per message, fsynced before returning.
HANDLER_MODULE = """\
import json, os
_OUT = os.open(os.environ["SOAK_HANDLER_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

def handle(messages):
    lines = [json.dumps({"topic": m.topic, "partition": m.partition, "offset": m.offset,
                         "next_offset": m.next_offset, "value": m.value.decode()})
             for m in messages]
    os.write(_OUT, ("\\n".join(lines) + "\\n").encode())
    os.fsync(_OUT)
"""


@dataclass(frozen=True)
class SoakSettings:
    """Timing knobs shared by every member (short, so faults resolve in seconds)."""

    session_timeout_ms: int = 3000
    commit_interval_ms: int = 500
    rebalance_backoff_ms: int = 1000
    rebalance_retries: int = 8
    batch_size: int = 200
    max_in_flight: int = 1000


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(zkconsumer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


class SoakCluster:
    """ZooKeeper (own, proxied for members) + ``brokers`` dev broker processes."""

    def __init__(self, base: Path, *, brokers: int = 2, partitions: int = 2,
                 session_timeout_ms: int = 3000, chroot: str = "/soak") -> None:
        self.base = base
        self.num_brokers = brokers
        self.partitions = partitions
        self.session_timeout_ms = session_timeout_ms
        self.chroot = chroot
        self.zk: ZooKeeperServer | None = None
        self.zk_port = 0
        self.proxy: TcpProxy | None = None
        self.brokers: dict[int, DevBrokerProcess] = {}
        self._broker_ports: dict[int, int] = {}

    @property
    def direct_connect(self) -> str:
        return f"127.0.0.1:{self.zk_port}{self.chroot}"

    @property
    def proxied_connect(self) -> str:
        if self.proxy is None:
            raise ZkConsumerError("soak cluster not started")
        return f"{self.proxy.address}{self.chroot}"

    def start(self) -> SoakCluster:
        self.base.mkdir(parents=True, exist_ok=True)
        self.zk = ZooKeeperServer(self.base / "zookeeper").start()
        self.zk_port = self.zk.port
        with ZkSession(self.zk.connect_string) as root:
            root.ensure_persistent(self.chroot)
        self.proxy = TcpProxy(self.zk_port).start()
        for broker_id in range(self.num_brokers):
            self._start_broker(broker_id)
        return self

    def _start_broker(self, broker_id: int) -> DevBrokerProcess:
        broker = DevBrokerProcess(
            broker_id, self.base / f"broker-{broker_id}", zk_connect=self.direct_connect,
            port=self._broker_ports.get(broker_id, 0), num_partitions=self.partitions,
            zk_session_timeout_ms=self.session_timeout_ms,
            registration_wait_ms=3 * self.session_timeout_ms, start_timeout=60.0)
        broker.start()
        self._broker_ports[broker_id] = broker.port
        self.brokers[broker_id] = broker
        return broker

    def register_topic(self, topic: str, seed: bytes = b"seed") -> None:
        """Create ``topic`` on every broker (one confirmed message each) and wait until
        ZooKeeper lists all of them, so producers and mirrors see a stable partition list."""
        for broker in self.brokers.values():
            with BrokerConnection(broker.host, broker.port) as conn:
                produce(conn, topic, 0, encode_message_set([seed]), confirm=True)
        deadline = time.monotonic() + 30
        with ZkSession(self.direct_connect) as session:
            while len(read_topic_partitions(session, topic)) < self.num_brokers:
                if time.monotonic() > deadline:
                    raise ZkConsumerError(f"topic {topic} not registered by every broker")
                time.sleep(0.05)

    def kill_zookeeper(self) -> None:
        if self.zk is not None and self.zk.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.zk.pid, signal.SIGKILL)
            self.zk.stop()  # reaps

    def start_zookeeper(self) -> None:
        self.zk = ZooKeeperServer(self.base / "zookeeper", port=self.zk_port).start()

    def kill_broker(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart_broker(self, broker_id: int) -> None:
        self._start_broker(broker_id)

    def stop(self) -> None:
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.terminate(timeout=10)
        if self.proxy is not None:
            self.proxy.close()
        if self.zk is not None:
            self.zk.stop()


@dataclass
class MemberSpec:
    """One group member: ``kind`` is output|exec|handler (``zkconsumer run``) or mirror."""

    name: str
    kind: str
    group: str
    topic: str
    streams: int = 1
    target_topic: str | None = None  # mirror only


@dataclass
class Member:
    """A member process; `start` again after a kill is a restart with the same files."""

    spec: MemberSpec
    cluster: SoakCluster
    workdir: Path
    settings: SoakSettings
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    stopped_at: float | None = None  # SIGSTOP time, while stopped
    exits: list[int] = field(default_factory=list)  # unexpected exit statuses
    metrics_port: int | None = None  # of the current process, once read from its log

    @property
    def output(self) -> Path:
        return self.workdir / f"{self.spec.name}.jsonl"

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.spec.name}.log"

    def command(self) -> list[str]:
        s, spec = self.settings, self.spec
        common = ["--zk", self.cluster.proxied_connect, "--group", spec.group,
                  "--topic", f"{spec.topic}:{spec.streams}",
                  "--set", f"zk.sessiontimeout.ms={s.session_timeout_ms}",
                  "--set", f"rebalance.backoff.ms={s.rebalance_backoff_ms}",
                  "--set", f"rebalance.retries.max={s.rebalance_retries}",
                  "--metrics-port", "0"]
        if spec.kind == "mirror":
            return [sys.executable, "-m", "zkconsumer", "mirror", *common,
                    "--to", f"kafka07://{self.cluster.direct_connect}",
                    "--topic-map", f"{spec.topic}:{spec.target_topic}",
                    "--set", f"mirror.commit.interval.ms={s.commit_interval_ms}",
                    "--set", f"mirror.max.in.flight={s.max_in_flight}",
                    "--set", f"mirror.poll.batch={s.batch_size}",
                    "--set", "mirror.shutdown.timeout.ms=5000",
                    "--set", "mirror.revoke.timeout.ms=3000"]
        sink = {"output": ["--output", str(self.output)],
                "exec": ["--exec", f"exec '{sys.executable}' soak_exec.py '{self.output}'"],
                "handler": ["--handler", "soak_handler:handle"]}[spec.kind]
        fmt = [] if spec.kind == "handler" else ["--format", "jsonl"]
        return [sys.executable, "-m", "zkconsumer", "run", *common, *sink, *fmt,
                "--set", f"autocommit.interval.ms={s.commit_interval_ms}",
                "--batch-size", str(s.batch_size), "--max-in-flight", str(s.max_in_flight),
                "--shutdown-timeout", "5", "--revoke-timeout", "3",
                "--restart-backoff", "0.2", "--log-level", "INFO"]

    def start(self) -> None:
        (self.workdir / "soak_exec.py").write_text(EXEC_CHILD)
        (self.workdir / "soak_handler.py").write_text(HANDLER_MODULE)
        env = _env({"SOAK_HANDLER_OUT": str(self.output)})
        with open(self.log_file, "ab") as log:
            log.write(f"--- soak: start #{self.starts + 1} at {time.time():.3f}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, cwd=self.workdir, env=env)
        self.starts += 1
        self.stopped_at = None
        self.metrics_port = None

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise ZkConsumerError(f"member {self.spec.name} not started")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped_at = time.monotonic()
        elif sig == signal.SIGCONT:
            self.stopped_at = None

    def kill(self) -> None:
        """SIGKILL (a crash: no commit, no deregistration) and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait for the clean exit; a member that hangs is killed and reported."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            if self.stopped_at is not None:
                self.signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise ZkConsumerError(
                    f"member {self.spec.name} did not stop within {timeout}s of SIGTERM; "
                    f"log: {self.log_file}") from None
        return self.proc.returncode

    def health(self, timeout: float = 0.5) -> tuple[int, str] | None:
        """``(status, body)`` of this member's ``/healthz``; None when it does not answer.

        The port (``--metrics-port 0``) is read from the member's log line ``metrics on
        http://H:P/metrics``, the last one (a restart picks a new port)."""
        if not self.alive():
            return None
        if self.metrics_port is None:
            try:
                text = self.log_file.read_text(errors="replace")
            except OSError:
                return None
            ports = _METRICS_LINE.findall(text[text.rfind("--- soak: start"):])
            if not ports:
                return None
            self.metrics_port = int(ports[-1])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/healthz",
                                        timeout=timeout) as resp:
                return int(resp.status), resp.read().decode("utf-8", "replace").strip()
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read().decode("utf-8", "replace").strip()
        except OSError:
            return None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
