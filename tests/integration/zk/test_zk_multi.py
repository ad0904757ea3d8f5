"""`set_if_versions` (zk/multi.py) on a real ZooKeeper: several compare-and-sets, all or none."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.multi import set_if_versions
from zkconsumer.zk.session import ZkSession


def _versions(session: ZkSession, paths: list[str]) -> list[int]:
    nodes = [session.get_node(p) for p in paths]
    assert all(n is not None for n in nodes)
    return [n.version for n in nodes if n is not None]


def test_all_written_when_every_version_matches(zk_session: ZkSession,
                                                zk_client: KazooClient) -> None:
    paths = [f"/multi/a/{i}" for i in range(3)]
    for p in paths:
        zk_session.update_persistent(p, b"old")
    seen = _versions(zk_session, paths)
    versions = set_if_versions(zk_session, [(p, b"new-%d" % i, v) for i, (p, v) in
                                            enumerate(zip(paths, seen, strict=True))])
    assert versions == _versions(zk_session, paths) == [1, 1, 1]
    # written through the session's chroot, seen by a raw client on the same chroot
    assert [zk_client.get(p)[0] for p in paths] == [b"new-0", b"new-1", b"new-2"]


def test_none_written_when_one_znode_changed_or_vanished(zk_session: ZkSession) -> None:
    paths = [f"/multi/b/{i}" for i in range(3)]
    for p in paths:
        zk_session.update_persistent(p, b"old")
    seen = _versions(zk_session, paths)
    zk_session.update_persistent(paths[1], b"someone else")  # version 0 -> 1
    mine = [(p, b"mine", v) for p, v in zip(paths, seen, strict=True)]
    assert set_if_versions(zk_session, mine) is None
    assert [zk_session.get(p) for p in paths] == [b"old", b"someone else", b"old"]
    zk_session.delete(paths[2])
    fresh = _versions(zk_session, paths[:2])
    assert set_if_versions(zk_session, [(paths[0], b"mine", fresh[0]),
                                        (paths[1], b"mine", fresh[1]),
                                        (paths[2], b"mine", 0)]) is None
    assert [zk_session.get(p) for p in paths] == [b"old", b"someone else", None]


def test_bad_paths_are_refused_before_anything_is_sent(zk_session: ZkSession) -> None:
    zk_session.update_persistent("/multi/c", b"old")
    with pytest.raises(ZooKeeperError, match="not an absolute znode path"):
        set_if_versions(zk_session, [("/multi/c", b"x", 0), ("multi/../c", b"x", 0)])
    assert zk_session.get("/multi/c") == b"old"
    assert set_if_versions(zk_session, []) == []
