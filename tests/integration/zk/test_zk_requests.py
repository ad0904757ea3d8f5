"""`ZkRequests`: one request's outcome as a value, pipelined batches, one-shot watches.

Real ZooKeeper (per-test chroot).  What the member's driver relies on: every error is an
outcome (never an exception), a watched children read of a missing znode fires on its
creation, a batch begun together is answered in order, and parents are created with null
data as zkclient does.
"""

from __future__ import annotations

import threading

from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.zk.requests import CHILDREN, EXISTS, ZkRequests
from zkconsumer.zk.session import ZkSession


class _Fired:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, path: str, kind: str) -> None:
        with self.lock:
            self.seen.append((path, kind))

    def count(self, item: tuple[str, str]) -> int:
        with self.lock:
            return self.seen.count(item)


def test_outcomes_are_values(zk_session: ZkSession, zk_client: KazooClient) -> None:
    zk = ZkRequests(zk_session, _Fired())
    assert zk.get("/a/b").error == "NO_NODE"
    made = zk.create("/a/b/c", b"x", ephemeral=True)
    assert made.error is None and made.version == 0
    assert made.ephemeral_owner == zk_session.session_id
    assert zk_client.get("/a/b")[0] is None  # parents: null data, like zkclient
    assert zk.create("/a/b/c", b"y", ephemeral=False).error == "NODE_EXISTS"
    got = zk.get("/a/b/c")
    assert (got.data, got.version, got.ephemeral_owner) == (b"x", 0, zk_session.session_id)
    assert zk.set("/a/b/c", b"z", 5).error == "BAD_VERSION"
    assert zk.set("/a/b/c", b"z", 0).version == 1
    assert zk.delete("/a/b/c", 0).error == "BAD_VERSION"
    assert zk.delete("/a/b", -1).error == "NOT_EMPTY"
    assert zk.children("/a/b", watch=False).children == ("c",)
    assert zk.delete("/a/b/c", 1).error is None
    assert zk.delete("/a/b/c", -1).error == "NO_NODE"
    assert zk.exists("/a/b/c", watch=False).has_stat is False
    assert zk.get("bad path").error == "OTHER"


def test_a_batch_is_answered_in_order(zk_session: ZkSession) -> None:
    """The requests of a batch are independent (the machine never batches a request with
    one it depends on): they are sent at once and answered in order."""
    zk = ZkRequests(zk_session, _Fired())
    assert zk.create("/b", None, False).error is None
    waiters = [zk.begin("create", f"/b/n{i:03d}", str(i).encode(), False) for i in range(50)]
    waiters += [zk.begin("get", f"/b/n{i:03d}") for i in range(50)]
    waiters.append(zk.begin("children", "/b", False))
    outcomes = [w() for w in waiters]
    assert all(o.error is None for o in outcomes)
    assert [o.data for o in outcomes[50:100]] == [str(i).encode() for i in range(50)]
    assert outcomes[-1].children == tuple(f"n{i:03d}" for i in range(50))


def test_watches_fire_once_per_arming(zk_session: ZkSession, zk_client: KazooClient) -> None:
    fired = _Fired()
    zk = ZkRequests(zk_session, fired)
    assert zk.children("/w", watch=True).error == "NO_NODE"  # armed on its creation
    assert zk.children("/w", watch=True).error == "NO_NODE"  # armed twice: fires once
    zk_client.create("/w")
    wait_until(lambda: fired.count(("/w", CHILDREN)) == 1, what="creation fired the watch")
    assert zk.children("/w", watch=True).children == ()
    zk_client.create("/w/x")
    wait_until(lambda: fired.count(("/w", CHILDREN)) == 2, what="a child fired it again")
    assert zk.exists("/w/x", watch=True).has_stat
    zk_client.delete("/w/x")
    wait_until(lambda: fired.count(("/w/x", EXISTS)) == 1, what="the deletion fired")
    zk_client.create("/w/y")  # the children watch was not re-armed: no firing
    assert zk.children("/w", watch=False).children == ("y",)
    assert fired.count(("/w", CHILDREN)) == 2
