"""``zkconsumer run`` started before its ZooKeeper answers (issue 22 item 3).

Started in bulk, members used to exit 1 when ZooKeeper did not answer within
``zk.connectiontimeout.ms``; under a supervisor's ``Restart=`` that is a crash loop against a
struggling ensemble.  Now ``run`` keeps trying, with backoff, logging each attempt and
answering ``/healthz`` 503 "not connected to ZooKeeper", until ``--startup-timeout``.

The ZooKeeper port is reserved (bound, not listening: connections are refused) until a real
ZooKeeper server is started on it; then the member joins and consumes every message.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_it_helpers import DaemonProcess, produce, read_lines, values
from fixtures.http import get
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.devcluster.zookeeper import ZooKeeperServer

FAST = ["--set", "zk.connectiontimeout.ms=1000"]  # each attempt gives up after 1 s


@pytest.fixture
def reserved_port() -> Iterator[tuple[int, socket.socket]]:
    """A port nobody listens on, kept bound so that nothing else takes it meanwhile."""
    port = restartable_port()
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    try:
        yield port, holder
    finally:
        holder.close()


def _attempts(log: str) -> int:
    return len(re.findall(r"ZooKeeper not answering \(attempt \d+\)", log))


def _metrics_port(d: DaemonProcess) -> int:
    def find() -> int | None:
        m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", d.log)
        return int(m.group(1)) if m else None
    return wait_until(find, timeout=60, what="metrics port in the log")


def test_run_waits_for_zookeeper_then_joins_and_consumes(
        tmp_path: Path, dev_broker: Any, reserved_port: tuple[int, socket.socket]) -> None:
    port, holder = reserved_port
    zk_connect = f"127.0.0.1:{port}"
    out = tmp_path / "out.txt"
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--output", str(out), "--metrics-port", "0", *FAST])
    server = None
    try:
        metrics = _metrics_port(d)
        wait_until(lambda: _attempts(d.log) >= 2 or d.proc.poll() is not None,
                   timeout=60, what="two logged attempts")
        assert d.proc.poll() is None, d.log  # still trying, not exited
        status, body = get(f"http://127.0.0.1:{metrics}/healthz")
        assert status == 503 and body.startswith("not connected to ZooKeeper: cannot connect "
                                                 f"to ZooKeeper at '{zk_connect}'"), body
        holder.close()
        server = ZooKeeperServer(tmp_path / "zk", port=port)
        server.start()
        dev_broker(num_partitions=2, zk=zk_connect)
        produce(zk_connect, "ev", values("z", 300))
        d.wait_stable(timeout=60)
        wait_until(lambda: len(read_lines(out)) >= 300, timeout=60, what="300 messages written")
        assert sorted(read_lines(out)) == values("z", 300)  # each once, none lost
        wait_until(lambda: get(f"http://127.0.0.1:{metrics}/healthz") == (200, "ok\n"),
                   timeout=30, what="healthy once joined")
        assert d.stop() == 0, d.log
    finally:
        d.close()
        if server is not None:
            server.stop()


def test_startup_timeout_gives_up_with_one_error_line(
        tmp_path: Path, reserved_port: tuple[int, socket.socket]) -> None:
    port, _ = reserved_port
    d = DaemonProcess(tmp_path, f"127.0.0.1:{port}", "g", [
        "--topic", "ev", "--output", str(tmp_path / "out.txt"), "--startup-timeout", "3",
        *FAST])
    try:
        assert d.proc.wait(60) == 1, d.log
    finally:
        d.close()
    assert _attempts(d.log) >= 1
    last = d.log.splitlines()[-1]
    assert re.fullmatch(rf"zkconsumer run: error: cannot connect to ZooKeeper at "
                        rf"'127\.0\.0\.1:{port}' within 1000 ms: .* \(gave up after \d+ "
                        r"attempts: --startup-timeout\)", last), last


def test_run_started_while_every_broker_is_down_waits_and_then_consumes(
        tmp_path: Path, broker_process: Any, zk_connect: str, zk_client: KazooClient) -> None:
    """The brokers' half of item 3: the only broker was killed (its znodes outlive it until
    its session expires), so the member claims partitions nobody serves, then sees the topic
    vanish.  It keeps running and consumes everything once the broker is back."""
    broker = broker_process(num_partitions=2)
    produce(zk_connect, "ev", values("b", 100))
    wait_until(lambda: zk_client.exists(f"/brokers/topics/ev/{broker.broker_id}"),
               what="topic registered")
    broker.kill()
    out = tmp_path / "out.txt"
    d = DaemonProcess(tmp_path, zk_connect, "g", ["--topic", "ev", "--output", str(out)])
    try:
        wait_until(lambda: "Connection refused" in d.log or d.proc.poll() is not None,
                   timeout=60, what="the member met the dead broker")
        wait_until(lambda: not zk_client.exists(f"/brokers/ids/{broker.broker_id}"),
                   timeout=60, what="the dead broker's session expired")
        assert d.proc.poll() is None, d.log
        broker_process.restart(broker)
        produce(zk_connect, "ev", values("b", 100, start=100))
        wait_until(lambda: len(read_lines(out)) >= 200, timeout=90, what="200 messages written")
        assert sorted(read_lines(out)) == values("b", 200)  # each once, none lost
        assert d.stop() == 0, d.log
    finally:
        d.close()
