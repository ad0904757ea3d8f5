"""ZkSession against a real ZooKeeper: zkclient semantics, chroots, real session expiry."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fixtures.waiting import wait_until
from fixtures.zookeeper import expire_session
from kazoo.client import KazooClient

from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.errors import ConfigurationError, SessionExpiredError, ZooKeeperError
from zkconsumer.zk.session import SessionState, ZkSession


def test_chroot_isolates_tests(zk_server: Any, zk_session: ZkSession, zk_chroot: str,
                               zk_client: KazooClient) -> None:
    zk_session.update_persistent("/brokers/ids/0", b"x")
    # visible through the raw client on the same chroot, and under the chroot from the root
    assert zk_client.get("/brokers/ids/0")[0] == b"x"
    other_chroot = f"{zk_chroot}-other"
    with ZkSession(zk_server.connect_string) as root:
        assert root.get(f"{zk_chroot}/brokers/ids/0") == b"x"
        assert not root.exists("/brokers/ids/0")
        root.ensure_persistent(other_chroot)
        try:
            with ZkSession(f"{zk_server.connect_string}{other_chroot}") as other:
                assert other.get_children("/brokers/ids") == []
                other.update_persistent("/brokers/ids/0", b"y")
            assert zk_session.get("/brokers/ids/0") == b"x"
        finally:
            root.delete_recursive(other_chroot)


def test_parents_have_null_data_like_zkclient(zk_session: ZkSession,
                                              zk_client: KazooClient) -> None:
    zk_session.update_persistent("/consumers/g/offsets/t/0-0", b"12")
    for parent in ("/consumers", "/consumers/g", "/consumers/g/offsets", "/consumers/g/offsets/t"):
        assert zk_client.get(parent)[0] is None, parent  # null, not b""
        node = zk_session.get_node(parent)
        assert node is not None and node.data is None and not node.ephemeral
        assert zk_session.get(parent) == b""
    assert zk_client.get("/consumers/g/offsets/t/0-0")[0] == b"12"
    # kazoo's own ensure_path writes b"", which is distinguishable
    zk_client.ensure_path("/kazoo-made")
    node = zk_session.get_node("/kazoo-made")
    assert node is not None and node.data == b""


def test_ensure_persistent_and_create_persistent_parents(zk_session: ZkSession,
                                                         zk_client: KazooClient) -> None:
    zk_session.create_persistent_parents("/a/b/c")
    assert zk_client.exists("/a/b") and not zk_client.exists("/a/b/c")
    zk_session.ensure_persistent("/a/b/c")
    assert zk_client.get("/a/b/c")[0] is None
    zk_session.ensure_persistent("/a/b/c")  # idempotent
    zk_session.ensure_persistent("/")
    zk_session.create_persistent_parents("/top")  # no parent to create
    assert zk_session.get_children("/a") == ["b"]


def test_create_ephemeral_expect_conflict(zk_session: ZkSession,
                                          zk_session_factory: Callable[..., ZkSession],
                                          zk_client: KazooClient) -> None:
    path = "/consumers/g/owners/t/0-0"
    assert zk_session.create_ephemeral_expect_conflict(path, b"g_c-0") is True
    data, stat = zk_client.get(path)
    assert data == b"g_c-0" and stat.ephemeralOwner == zk_session.session_id
    assert zk_client.get("/consumers/g/owners/t")[0] is None  # persistent null parent
    assert zk_client.exists("/consumers/g/owners/t").ephemeralOwner == 0
    # identical data from this session: the "retried after connection loss" case
    assert zk_session.create_ephemeral_expect_conflict(path, b"g_c-0") is True
    # different data: someone else's
    assert zk_session.create_ephemeral_expect_conflict(path, b"g_d-0") is False
    # identical data but another live session owns it: not ours either
    other = zk_session_factory()
    assert other.create_ephemeral_expect_conflict(path, b"g_c-0") is False
    assert zk_client.get(path)[0] == b"g_c-0"
    zk_session.close()
    wait_until(lambda: zk_client.exists(path) is None, what="ephemeral gone after close")
    assert other.create_ephemeral_expect_conflict(path, b"g_c-0") is True


def test_update_persistent_creates_then_overwrites(zk_session: ZkSession,
                                                   zk_client: KazooClient) -> None:
    path = "/consumers/g/offsets/t/1-0"
    zk_session.update_persistent(path, b"100")
    zk_session.update_persistent(path, b"200")
    data, stat = zk_client.get(path)
    assert data == b"200" and stat.version == 1 and stat.ephemeralOwner == 0
    # an existing null-data znode (e.g. created by a tool) is simply written
    zk_client.create("/consumers/g/offsets/t/2-0", None)
    zk_session.update_persistent("/consumers/g/offsets/t/2-0", b"7")
    assert zk_client.get("/consumers/g/offsets/t/2-0")[0] == b"7"


def test_reads_and_deletes(zk_session: ZkSession, zk_client: KazooClient) -> None:
    assert zk_session.get("/missing") is None
    assert zk_session.get_node("/missing") is None
    assert zk_session.get_children("/missing") == []
    assert not zk_session.exists("/missing")
    zk_session.delete("/missing")  # NoNode is fine
    zk_session.delete_recursive("/missing")
    for child in ("b", "a", "c"):
        zk_session.update_persistent(f"/d/{child}/x", b"1")
    assert zk_session.get_children("/d") == ["a", "b", "c"]
    with pytest.raises(ZooKeeperError, match="children"):
        zk_session.delete("/d")
    zk_session.delete("/d/a/x")
    assert zk_session.get_children("/d/a") == []
    zk_session.delete_recursive("/d")
    assert zk_client.exists("/d") is None


def test_errors_are_translated(zk_server: Any, zk_connect: str) -> None:
    session = ZkSession(zk_connect).start()
    for bad in ("no-leading-slash", "/trailing/", "/a//b", "/a/../b", ""):
        with pytest.raises(ZooKeeperError, match="invalid request"):
            session.get(bad)
    session.close()
    session.close()  # idempotent
    with pytest.raises(ZooKeeperError, match="closed"):
        session.get("/x")
    for bad_connect in ("", "host:notaport"):
        with pytest.raises(ConfigurationError, match=r"zk\.connect"):
            ZkSession(bad_connect)
    dead = f"127.0.0.1:{restartable_port()}"
    with pytest.raises(ZooKeeperError, match=dead):
        ZkSession(dead, connection_timeout_ms=300).start()


def test_session_expiry_removes_ephemerals_and_starts_a_new_session(
        zk_session: ZkSession, zk_client: KazooClient) -> None:
    states: list[SessionState] = []
    renewed = threading.Event()
    zk_session.add_state_listener(states.append)

    def reregister() -> None:  # zkclient handleNewSession: ZK calls allowed here
        zk_session.create_ephemeral_expect_conflict("/brokers/ids/1", b"c:h:1")
        renewed.set()

    zk_session.add_new_session_listener(reregister)
    assert zk_session.create_ephemeral_expect_conflict("/brokers/ids/1", b"c:h:1")
    zk_session.update_persistent("/persistent", b"kept")
    old = zk_session.session_id
    assert expire_session(zk_session) == old
    assert SessionState.LOST in states
    assert renewed.wait(10), "new-session listener did not run"
    assert zk_session.session_id != old
    assert states[-1] == SessionState.CONNECTED and states[-1] == "CONNECTED"
    data, stat = zk_client.get("/brokers/ids/1")
    assert data == b"c:h:1" and stat.ephemeralOwner == zk_session.session_id
    assert zk_session.get("/persistent") == b"kept"


def test_expire_session_on_a_raw_kazoo_client(zk_client: KazooClient,
                                              zk_session: ZkSession,
                                              zk_expire: Callable[..., int]) -> None:
    zk_client.create("/eph", b"1", ephemeral=True)
    zk_expire(zk_client, wait_reconnect=True)
    assert not zk_session.exists("/eph")
    assert zk_client.connected


def test_operations_on_an_expired_session_raise_session_expired(zk_session: ZkSession) -> None:
    # At the moment kazoo reports LOST its state is EXPIRED_SESSION and every request fails
    # at once (nothing blocks), so probing from the listener observes the real translation.
    seen: list[BaseException] = []

    def probe(state: SessionState) -> None:
        if state == SessionState.LOST:
            try:
                zk_session.get("/x")
            except BaseException as exc:
                seen.append(exc)

    zk_session.add_state_listener(probe)
    expire_session(zk_session, wait_reconnect=True)
    assert len(seen) == 1 and isinstance(seen[0], SessionExpiredError), seen
    assert zk_session.get("/x") is None  # usable again on the new session
