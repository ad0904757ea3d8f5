"""Helpers for the monitor's integration tests: a monitor on the test's cluster, its API,
and Scala-style group znodes written by the test itself (a 0.7 Scala member writes exactly
these: an ephemeral ids registration, ephemeral owners, persistent offsets)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fixtures.http import get
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.client import BrokerConnection, SimpleConsumer, confirmed_produce
from zkconsumer.monitor.evaluator import EvalConfig
from zkconsumer.monitor.sampler import Sampler
from zkconsumer.monitor.server import MonitorServer
from zkconsumer.monitor.service import Monitor
from zkconsumer.monitor.store import WindowStore
from zkconsumer.protocol import ProduceRequest, encode_message_set
from zkconsumer.zk.session import ZkSession

REPO = Path(__file__).resolve().parents[3]


class RunningMonitor:
    """A `Monitor` polling in its thread plus its HTTP server, in the test process."""

    def __init__(self, zk_connect: str, *, interval: float = 0.3, window: int = 4,
                 groups: str | None = None, err_cycles: int = 2, **kw: Any) -> None:
        self.session = ZkSession(zk_connect).start()
        self.sampler = Sampler(self.session, groups=groups, socket_timeout=2.0)
        self.store = WindowStore(max(window + 1, 60), kw.pop("store", None))
        self.monitor = Monitor(self.sampler, self.store,
                               EvalConfig(window=window, interval=interval,
                                          err_cycles=err_cycles), **kw)
        self.server = MonitorServer(self.monitor, "127.0.0.1", 0)
        self.url = self.server.url
        self.server.start()
        self.monitor.start()

    def api(self, path: str) -> Any:
        status, body = get(self.url.rstrip("/") + path)
        assert status == 200, (path, status, body)
        return json.loads(body)

    def group(self, name: str) -> dict[str, Any] | None:
        ev = self.monitor.state.groups.get(name)
        return None if ev is None else ev.as_dict(history=False)

    def wait_status(self, group: str, status: str, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until ``group`` evaluates to ``status``; the last evaluation in the message."""
        last: list[Any] = [None]

        def check() -> dict[str, Any] | None:
            g = self.group(group)
            last[0] = g and {"status": g["status"], "reasons": g["reasons"][:4]}
            return g if g is not None and g["status"] == status else None
        try:
            return wait_until(check, timeout=timeout, what=f"group {group} {status}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last evaluation: {last[0]}") from None

    def close(self) -> None:
        self.monitor.stop()
        self.server.close()
        self.sampler.close()
        self.store.close()
        self.session.close()


@contextmanager
def running_monitor(zk_connect: str, **kw: Any) -> Iterator[RunningMonitor]:
    mon = RunningMonitor(zk_connect, **kw)
    try:
        yield mon
    finally:
        mon.close()


def scala_member(zk: KazooClient, group: str, consumer_id: str, topics: dict[str, int]) -> None:
    """Register a member as a Scala 0.7 consumer does (ephemeral, its dbString)."""
    value = "{ " + ",".join(f'"{t}": {n}' for t, n in topics.items()) + " }"
    zk.ensure_path(f"/consumers/{group}/ids")
    zk.create(f"/consumers/{group}/ids/{consumer_id}", value.encode(), ephemeral=True)


def scala_owner(zk: KazooClient, group: str, topic: str, partition: str, thread: str) -> None:
    zk.ensure_path(f"/consumers/{group}/owners/{topic}")
    zk.create(f"/consumers/{group}/owners/{topic}/{partition}", thread.encode(), ephemeral=True)


def scala_commit(zk: KazooClient, group: str, topic: str, partition: str, offset: int) -> None:
    """updatePersistentPath: write the value whether or not it changed (Scala rewrites)."""
    path = f"/consumers/{group}/offsets/{topic}/{partition}"
    if zk.exists(path):
        zk.set(path, str(offset).encode())
    else:
        zk.create(path, str(offset).encode(), makepath=True)


def produce_to(broker: Any, topic: str, partition: int, n: int) -> int:
    """``n`` messages of 10 bytes to one partition, confirmed; returns the log end after them
    (the broker registers the topic on its first message)."""
    with BrokerConnection(broker.host, broker.port) as conn:
        confirmed_produce(conn, [ProduceRequest(topic, partition, encode_message_set(
            [b"x" * 10 for _ in range(n)]))])
    with SimpleConsumer(broker.host, broker.port) as c:
        return c.latest_offset(topic, partition)


def monitor_once(zk_connect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``zkconsumer monitor --zk ... --once ARGS`` as a real process."""
    return subprocess.run([sys.executable, "-m", "zkconsumer", "monitor", "--zk", zk_connect,
                           "--once", *args], capture_output=True, text=True, timeout=120,
                          cwd=str(REPO))
