"""Child watches: fire on creation of a missing path, on changes, and after session expiry."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fixtures.waiting import wait_until
from fixtures.zookeeper import expire_session
from kazoo.client import KazooClient

from zkconsumer.bench.soak_proxy import TcpProxy
from zkconsumer.zk.session import ZkSession
from zkconsumer.zk.watch import watch_children


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.lock = threading.Lock()

    def __call__(self, children: list[str]) -> None:
        with self.lock:
            self.calls.append(children)

    def last(self) -> list[str] | None:
        with self.lock:
            return self.calls[-1] if self.calls else None


def test_watch_on_missing_path_fires_when_it_is_created(zk_session: ZkSession,
                                                         zk_client: KazooClient) -> None:
    rec = Recorder()
    watch = watch_children(zk_session, "/brokers/topics/t", rec)
    assert rec.calls == [[]]  # called at once; the path does not exist yet
    zk_client.create("/brokers/topics/t/0", b"1", makepath=True)
    wait_until(lambda: rec.last() == ["0"], what="watch fired on creation")
    zk_client.create("/brokers/topics/t/1", b"1")
    wait_until(lambda: rec.last() == ["0", "1"], what="child added")
    zk_client.delete("/brokers/topics/t/0")
    wait_until(lambda: rec.last() == ["1"], what="child removed")
    zk_client.delete("/brokers/topics/t", recursive=True)
    wait_until(lambda: rec.last() == [], what="path deleted")
    zk_client.create("/brokers/topics/t/2", b"1", makepath=True)
    wait_until(lambda: rec.last() == ["2"], what="path re-created")
    watch.cancel()
    n = len(rec.calls)
    zk_client.create("/brokers/topics/t/3", b"1")
    # a watch that is still armed fires into the cancelled object: prove nothing arrives by
    # waiting for a second, independent watch to see the same change
    seen = Recorder()
    watch_children(zk_session, "/brokers/topics/t", seen)
    wait_until(lambda: seen.last() == ["2", "3"], what="second watch")
    assert len(rec.calls) == n and watch.cancelled


def test_watch_survives_session_expiry(zk_session: ZkSession, zk_client: KazooClient) -> None:
    rec = Recorder()
    watch_children(zk_session, "/consumers/g/ids", rec)
    zk_client.create("/consumers/g/ids/a", b"{}", makepath=True)
    wait_until(lambda: rec.last() == ["a"], what="first change")
    expire_session(zk_session, wait_reconnect=True)
    zk_client.create("/consumers/g/ids/b", b"{}")
    wait_until(lambda: rec.last() == ["a", "b"], what="change after expiry")


def test_raising_callback_keeps_the_watch(zk_session: ZkSession, zk_client: KazooClient) -> None:
    seen: list[list[str]] = []

    def bad(children: list[str]) -> None:
        seen.append(children)
        raise RuntimeError("boom")

    watch_children(zk_session, "/w", bad)
    zk_client.create("/w/a", b"", makepath=True)
    wait_until(lambda: seen and seen[-1] == ["a"], what="first")
    zk_client.create("/w/b", b"")
    wait_until(lambda: seen[-1] == ["a", "b"], what="second")


def test_watch_is_rearmed_after_a_connection_loss_that_keeps_the_session(
        zk_server: Any, zk_chroot: str, zk_client: KazooClient,
        tcp_proxy: Callable[[int], TcpProxy]) -> None:
    # Issue 11, Defect 2: kazoo drops every watcher when the connection drops, also when the
    # session survives (SUSPENDED -> CONNECTED, same session id).  The watch must re-arm on
    # the reconnect, report the children once, and see every later change.
    proxy = tcp_proxy(zk_server.port)
    session = ZkSession(f"{proxy.address}{zk_chroot}", session_timeout_ms=10000).start()
    try:
        rec = Recorder()
        watch = watch_children(session, "/consumers/g/ids", rec)
        zk_client.create("/consumers/g/ids/a", b"{}", makepath=True)
        wait_until(lambda: rec.last() == ["a"], what="first change")
        assert watch.armed
        sid = session.session_id
        states: list[str] = []
        session.add_state_listener(lambda s: states.append(s.value))
        assert proxy.drop_all() >= 1
        wait_until(lambda: states[-2:] == ["SUSPENDED", "CONNECTED"], timeout=15,
                   what="suspended, then reconnected")
        assert session.session_id == sid  # the session was kept
        wait_until(lambda: watch.armed, what="watch re-armed")
        zk_client.create("/consumers/g/ids/b", b"{}")
        wait_until(lambda: rec.last() == ["a", "b"], what="change after the reconnect")
        zk_client.delete("/consumers/g/ids/a")
        wait_until(lambda: rec.last() == ["b"], what="second change after the reconnect")
    finally:
        session.close()
