"""The two pipelined readers the monitor uses answer exactly what `ZkSession` answers: the
plain-socket `PipelinedReader` (its own short session) and `BulkReader` (through kazoo), on
a chroot, for present, empty, null-data and missing znodes, across window boundaries."""

from __future__ import annotations

from typing import Any

import pytest

from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.bulk import BulkReader, create_many
from zkconsumer.zk.pipeline import PipelinedReader
from zkconsumer.zk.session import ZkSession


def test_readers_agree_with_the_session(zk_connect: str, zk_session: ZkSession,
                                        zk_client: Any) -> None:
    create_many(zk_session, [(f"/a/n{i:03d}", str(i).encode(), False) for i in range(25)]
                + [("/a/empty", b"", False), ("/b/eph", b"x", True)])
    zk_client.create("/a/null", None)
    paths = ["/a", "/b", "/missing", "/a/n000", "/a/empty", "/a/null", "/b/eph",
             *[f"/a/n{i:03d}" for i in range(1, 25)]]
    expected_nodes = {p: zk_session.get_node(p) for p in paths}
    expected_children = {p: zk_session.get_children(p) for p in paths}
    assert expected_nodes["/missing"] is None and expected_nodes["/a/null"].data is None
    bulk = BulkReader(zk_session, window=7)
    with PipelinedReader(zk_connect, window=7) as pipe:
        for reader in (bulk, pipe):
            assert reader.nodes(paths) == expected_nodes
            assert reader.children(paths) == expected_children
            versioned = reader.children_versioned(paths)
            assert {p: v[0] for p, v in versioned.items()} == expected_children
            assert versioned["/missing"] == ([], None)
            czxid, cversion = versioned["/a"][1]  # type: ignore[misc]
            assert cversion >= 27 and czxid > 0
        assert pipe.reads == bulk.reads == 3 * len(paths)
    with pytest.raises(ZooKeeperError, match="not open"):
        pipe.nodes(["/a"])
    with pytest.raises(ZooKeeperError, match="no ZooKeeper server answered"):
        PipelinedReader("127.0.0.1:1", timeout=2).open()
