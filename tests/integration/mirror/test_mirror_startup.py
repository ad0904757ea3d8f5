"""``zkconsumer mirror`` at start-up waits instead of exiting, as ``zkconsumer run`` does
(issue 22 item 3, issue 18's "no member gives up because of contention").

* ZooKeeper not answering yet: each attempt is logged, ``/healthz`` answers 503 "not
  connected to ZooKeeper", and once a real ZooKeeper listens on the port the mirror joins and
  copies every message (both engines: exactly-once and ``--at-least-once``).
* A first rebalance blocked by a dead member's owner znodes (its session lives on, as after a
  ``kill -9``): the mirror logs ``start_retry`` and joins again instead of exiting 1, and
  copies everything once the dead session is gone.
* SIGTERM while waiting (during a connection attempt, or between start attempts): exit 0
  within a second.

Real ZooKeeper, dev brokers, tansu, real ``zkconsumer mirror`` processes.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bridge_helpers import produce_modern, read_07, register_topic, start_bridge
from fixtures.http import get
from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from kazoo.client import KazooClient
from mirror_helpers import mirror_subprocess, produce

from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.zk.session import ZkSession

GROUP = "g"
ME = f"{GROUP}_m"
DEAD = f"{GROUP}_a"  # sorts before us: the range assignment gives it partition 0, us 1
FAST = ["--set", "mirror.commit.interval.ms=100", "--set", "rebalance.backoff.ms=300",
        "--set", "rebalance.retries.max=2", "--set", "consumerid=m"]
MODES = {"exactly-once": [], "at-least-once": ["--at-least-once"]}


def _values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:05d}".encode() for i in range(n)]


def _log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _attempts(log: str) -> int:
    return len(re.findall(r"ZooKeeper not answering \(attempt \d+\)", log))


def _reserved_port() -> tuple[int, socket.socket]:
    """A port for a ZooKeeper not started yet: bound, not listening (connections are refused),
    so nothing else takes it until the test closes the socket and starts the server on it."""
    port = restartable_port()
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    return port, holder


def _copied(bootstrap: str, topic: str, n: int) -> list[bytes]:
    got = read_partitions(bootstrap, topic, n, timeout=90)
    return sorted(value for records in got.values() for _, value in records)


def _stop(proc: subprocess.Popen[bytes], log_file: Path) -> float:
    """SIGTERM ``proc``; it must exit 0.  Seconds from the signal to the exit."""
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(30)
    took = time.monotonic() - started
    assert code == 0, _log(log_file)[-3000:]
    return took


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def _sigterm_exits_at_once(args: list[str], log_file: Path, waiting: Callable[[str], bool],
                           what: str) -> None:
    """Start ``zkconsumer mirror ARGS``; once its log shows it ``waiting`` (and it still
    runs), SIGTERM it: it must exit 0 within a second."""
    proc = mirror_subprocess(args, log_file)
    try:
        wait_until(lambda: waiting(_log(log_file)) or proc.poll() is not None, timeout=60,
                   what=what)
        assert proc.poll() is None, _log(log_file)
        took = _stop(proc, log_file)
    finally:
        _kill(proc)
    print(f"{what}: SIGTERM -> exit {took:.3f}s")
    assert took < 1.0, (took, _log(log_file))


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mirror_waits_for_zookeeper_then_copies_everything(
        tmp_path: Path, dev_broker: Any, tansu: Any, mode: str) -> None:
    port, holder = _reserved_port()
    zk_connect = f"127.0.0.1:{port}"
    create_topic(tansu.bootstrap, "ev", 2)
    log_file = tmp_path / "mirror.log"
    proc = mirror_subprocess(["--zk", zk_connect, "--group", GROUP, "--topic", "ev",
                              "--to", tansu.url, "--metrics-port", "0",
                              "--set", "zk.connectiontimeout.ms=1000", *FAST, *MODES[mode]],
                             log_file)
    server = None
    try:
        metrics = int(wait_until(
            lambda: re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", _log(log_file)),
            timeout=60, what="the metrics port in the log").group(1))
        wait_until(lambda: _attempts(_log(log_file)) >= 2 or proc.poll() is not None,
                   timeout=60, what="two logged attempts")
        assert proc.poll() is None, _log(log_file)  # still trying, not exited
        status, body = get(f"http://127.0.0.1:{metrics}/healthz")
        assert status == 503 and body.startswith(
            f"not connected to ZooKeeper: cannot connect to ZooKeeper at '{zk_connect}'"), body
        holder.close()
        server = ZooKeeperServer(tmp_path / "zk", port=port)
        server.start()
        dev_broker(num_partitions=2, zk=zk_connect)
        produce(zk_connect, "ev", _values("z", 300), chunk=10)
        assert _copied(tansu.bootstrap, "ev", 300) == _values("z", 300)  # each once
        wait_until(lambda: get(f"http://127.0.0.1:{metrics}/healthz") == (200, "ok\n"),
                   timeout=30, what="healthy once joined")
        _stop(proc, log_file)
    finally:
        _kill(proc)
        holder.close()
        if server is not None:
            server.stop()


def _dead_member(zk_session_factory: Callable[..., ZkSession]) -> ZkSession:
    """A member that was kill -9'd: its registration and owner znodes live on with its
    session (never closed here until the test says the session ended)."""
    dead = zk_session_factory()
    assert dead.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/ids/{DEAD}",
                                                 b'{ "ev": 1 }')
    for name in ("0-0", "0-1"):
        assert dead.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/owners/ev/{name}",
                                                     f"{DEAD}-0".encode())
    return dead


@pytest.mark.parametrize("mode", sorted(MODES))
def test_mirror_blocked_by_a_dead_members_owners_retries_then_copies_everything(
        tmp_path: Path, dev_broker: Any, tansu: Any, zk_connect: str, zk_client: KazooClient,
        zk_session_factory: Callable[..., ZkSession], mode: str) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "ev", _values("c", 200), chunk=10)
    create_topic(tansu.bootstrap, "ev", 2)
    dead = _dead_member(zk_session_factory)
    log_file = tmp_path / "mirror.log"
    proc = mirror_subprocess(["--zk", zk_connect, "--group", GROUP, "--topic", "ev",
                              "--to", tansu.url, *FAST, *MODES[mode]], log_file)
    try:
        wait_until(lambda: "could not join the group yet" in _log(log_file)
                   or proc.poll() is not None, timeout=60,
                   what="the first rebalance failing on the dead member's owners")
        assert proc.poll() is None, _log(log_file)  # retrying (start_retry), not exited
        dead.close()  # its session ends: registration and owners vanish, as at expiry
        produce(zk_connect, "ev", _values("c", 400)[200:], chunk=10)
        assert _copied(tansu.bootstrap, "ev", 400) == _values("c", 400)  # each once
        assert zk_client.get_children(f"/consumers/{GROUP}/ids") == [ME]
        _stop(proc, log_file)
    finally:
        _kill(proc)


@pytest.mark.parametrize(("connect_ms", "attempts"), [(30000, 0), (500, 1)],
                         ids=["during-an-attempt", "between-attempts"])
def test_sigterm_while_waiting_for_zookeeper_exits_0_at_once(
        tmp_path: Path, tansu: Any, connect_ms: int, attempts: int) -> None:
    """During a connection attempt (30 s timeout) and in the backoff between attempts."""
    port = restartable_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:  # bound, not listening
        holder.bind(("127.0.0.1", port))
        _sigterm_exits_at_once(
            ["--zk", f"127.0.0.1:{port}", "--group", GROUP, "--topic", "ev", "--to", tansu.url,
             "--set", f"zk.connectiontimeout.ms={connect_ms}", *FAST], tmp_path / "mirror.log",
            lambda log: f"-> {tansu.url}" in log and _attempts(log) >= attempts,
            f"waiting for ZooKeeper (zk.connectiontimeout.ms={connect_ms})")


def test_sigterm_while_blocked_by_a_dead_member_exits_0_at_once(
        tmp_path: Path, dev_broker: Any, tansu: Any, zk_connect: str, zk_client: KazooClient,
        zk_session_factory: Callable[..., ZkSession]) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "ev", _values("s", 10), chunk=1)
    create_topic(tansu.bootstrap, "ev", 2)
    _dead_member(zk_session_factory)
    _sigterm_exits_at_once(["--zk", zk_connect, "--group", GROUP, "--topic", "ev",
                            "--to", tansu.url, *FAST, "--set", "rebalance.backoff.ms=5000"],
                           tmp_path / "mirror.log",
                           lambda log: "partitions still owned by others" in log,
                           "the first rebalance backing off on the dead member's owners")
    assert zk_client.get_children(f"/consumers/{GROUP}/ids") == [DEAD]


def test_bridge_waits_for_its_07_zookeeper_then_writes_everything(
        tmp_path: Path, dev_broker: Any, tansu: Any) -> None:
    """The bridge's 0.7 target: not answering at start is waited for as by the forward
    mirror (``/healthz``'s reason in ``stats.zk_unreachable``), then every record lands once."""
    port, holder = _reserved_port()
    zk_connect = f"127.0.0.1:{port}"
    create_topic(tansu.bootstrap, "orders", 2)
    bridge = start_bridge(tansu.bootstrap, zk_connect, ["orders"],
                          topic_map={"orders": "orders07"},
                          target_options={"zk.connectiontimeout.ms": "1000"})
    server = None
    try:
        wait_until(lambda: (bridge.mirror.stats.zk_unreachable or "").startswith(
            f"cannot connect to ZooKeeper at '{zk_connect}'") or not bridge.alive,
            timeout=60, what="the bridge waiting for the 0.7 ZooKeeper")
        assert bridge.alive, bridge.error
        holder.close()
        server = ZooKeeperServer(tmp_path / "zk", port=port)
        server.start()
        register_topic([dev_broker(num_partitions=2, zk=zk_connect)], "orders07", 2)
        wait_until(lambda: len(read_07(zk_connect, "orders07")) == 2, timeout=30,
                   what="the 0.7 topic registered")
        records = [(None, v) for v in _values("b", 200)]
        produce_modern(tansu.bootstrap, "orders", records, 2)
        wait_until(lambda: sum(map(len, read_07(zk_connect, "orders07").values())) >= 200,
                   timeout=90, what="every record in 0.7")
        assert bridge.mirror.stats.zk_unreachable is None
        bridge.stop()
        got = sorted(v for values in read_07(zk_connect, "orders07").values() for v in values)
        assert got == _values("b", 200)  # each once
    finally:
        bridge.stop()
        holder.close()
        if server is not None:
            server.stop()


def test_startup_timeout_gives_up_with_one_error_line(tmp_path: Path, tansu: Any) -> None:
    port, holder = _reserved_port()
    log_file = tmp_path / "mirror.log"
    with holder:
        proc = mirror_subprocess(["--zk", f"127.0.0.1:{port}", "--group", GROUP, "--topic",
                                  "ev", "--to", tansu.url, "--startup-timeout", "3",
                                  "--set", "zk.connectiontimeout.ms=1000", *FAST], log_file)
        try:
            assert proc.wait(60) == 1, _log(log_file)
        finally:
            _kill(proc)
    log = _log(log_file)
    assert _attempts(log) >= 1
    last = log.splitlines()[-1]
    assert re.fullmatch(rf"zkconsumer mirror: error: cannot connect to ZooKeeper at "
                        rf"'127\.0\.0\.1:{port}' within 1000 ms: .* \(gave up after \d+ "
                        r"attempts: --startup-timeout\)", last), last


def test_bridge_stopped_during_its_first_07_connection_attempt_ends_at_once(
        tansu: Any) -> None:
    """A stop (SIGTERM) while the bridge's first 0.7 ZooKeeper connection attempt is still
    running (30 s timeout) ends it within a second: the attempt is abandoned, not waited
    for."""
    port = restartable_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:  # bound, not listening
        holder.bind(("127.0.0.1", port))
        create_topic(tansu.bootstrap, "orders", 1)
        bridge = start_bridge(tansu.bootstrap, f"127.0.0.1:{port}", ["orders"],
                              target_options={"zk.connectiontimeout.ms": "30000"})
        try:
            wait_until(lambda: bridge.mirror.sink.connecting
                       or not bridge.alive, timeout=30, what="the first connection attempt")
            assert bridge.alive, bridge.error
            started = time.monotonic()
            bridge.stop()
            took = time.monotonic() - started
        finally:
            bridge.stop()
        assert not bridge.alive
        assert took < 1.0, took
        assert bridge.error is None, bridge.error
