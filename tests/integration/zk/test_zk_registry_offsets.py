"""Cluster, group and offset reads/writes against a real ZooKeeper, in Scala's formats."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from zkconsumer.errors import ZnodeDataError
from zkconsumer.zk import offsets, registry
from zkconsumer.zk.paths import BrokerInfo, TopicCount
from zkconsumer.zk.session import ZkSession


def _scala_broker(client: KazooClient, bid: int, value: bytes) -> None:
    client.create(f"/brokers/ids/{bid}", value, ephemeral=True, makepath=True)


def test_read_brokers_topics_and_partitions(zk_session: ZkSession, zk_client: KazooClient) -> None:
    assert registry.read_brokers(zk_session) == {}
    assert registry.read_topics(zk_session) == []
    _scala_broker(zk_client, 10, b"127.0.0.1-1315436360737:127.0.0.1:9092")
    _scala_broker(zk_client, 2, b"10.1.2.3-1315436360999:10.1.2.3:9093")
    for topic, bid, n in (("t", 10, 2), ("t", 2, 1), ("u", 2, 4)):
        zk_client.create(f"/brokers/topics/{topic}/{bid}", str(n).encode(), ephemeral=True,
                         makepath=True)
    assert registry.read_brokers(zk_session) == {
        2: BrokerInfo(2, "10.1.2.3-1315436360999", "10.1.2.3", 9093),
        10: BrokerInfo(10, "127.0.0.1-1315436360737", "127.0.0.1", 9092),
    }
    assert registry.read_topics(zk_session) == ["t", "u"]
    assert registry.read_topic_partitions(zk_session, "t") == {2: 1, 10: 2}
    assert registry.read_topic_partitions(zk_session, "missing") == {}
    # string order, as the Scala consumer sorts: "10-0" < "10-1" < "2-0"
    assert registry.read_partition_names(zk_session, "t") == ["10-0", "10-1", "2-0"]


def test_garbage_in_the_registry_raises_when_strict(zk_session: ZkSession,
                                                    zk_client: KazooClient) -> None:
    _scala_broker(zk_client, 1, b"127.0.0.1:9092")  # the docs' wrong 2-field format
    with pytest.raises(ZnodeDataError) as err:
        registry.read_brokers(zk_session, strict=True)
    assert err.value.path == "/brokers/ids/1" and err.value.data == b"127.0.0.1:9092"
    zk_client.create("/brokers/topics/t/1", b"", makepath=True)
    with pytest.raises(ZnodeDataError):
        registry.read_topic_partitions(zk_session, "t", strict=True)
    zk_client.create("/brokers/ids/notanumber", b"c:h:1")
    with pytest.raises(ZnodeDataError):
        registry.read_brokers(zk_session, strict=True)


def test_garbage_broker_znodes_are_skipped_and_logged_once(
        zk_session: ZkSession, zk_client: KazooClient, caplog: pytest.LogCaptureFixture) -> None:
    _scala_broker(zk_client, 1, b"127.0.0.1:9092")
    _scala_broker(zk_client, 2, b"h-1:h:9092")
    zk_client.create("/brokers/ids/notanumber", b"c:h:1")
    zk_client.create("/brokers/topics/t/1", b"", makepath=True)
    zk_client.create("/brokers/topics/t/2", b"3")
    zk_client.create("/brokers/topics/t/x", b"3")
    for _ in range(3):  # e.g. three rebalances: one ERROR per distinct bad value
        assert registry.read_brokers(zk_session) == {2: BrokerInfo(2, "h-1", "h", 9092)}
        assert registry.read_partition_names(zk_session, "t") == ["2-0", "2-1", "2-2"]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 4, errors
    assert any("/brokers/ids/1" in e and "not registered" in e for e in errors)
    assert any("/brokers/topics/t/1" in e and "left out" in e for e in errors)
    zk_client.set("/brokers/ids/1", b"other garbage")  # a new bad value is reported again
    registry.read_brokers(zk_session)
    assert sum("other garbage" in r.getMessage() for r in caplog.records) == 1


def test_group_members_and_owners(zk_session: ZkSession, zk_client: KazooClient) -> None:
    assert registry.read_group_members(zk_session, "g") == {}
    zk_session.create_ephemeral_expect_conflict("/consumers/g/ids/g_a", b'{ "t": 2 }')
    zk_session.create_ephemeral_expect_conflict("/consumers/g/ids/g_b", b"*1*t.*")
    zk_session.create_ephemeral_expect_conflict("/consumers/g/owners/t/0-0", b"g_a-0")
    members = registry.read_group_members(zk_session, "g")
    assert members == {"g_a": TopicCount.static({"t": 2}),
                       "g_b": TopicCount.wildcard(True, 1, "t.*")}
    assert registry.read_owners(zk_session, "g", "t") == {"0-0": "g_a-0"}
    zk_client.create("/consumers/g/ids/g_c", b'{"t": 1.0}')
    with pytest.raises(ZnodeDataError):
        registry.read_group_members(zk_session, "g")


def test_offsets_round_trip_in_scala_format(zk_session: ZkSession, zk_client: KazooClient) -> None:
    assert offsets.read_offset(zk_session, "g", "t", "0-0") is None
    assert offsets.read_group_offsets(zk_session, "g") == {}
    offsets.commit_offset(zk_session, "g", "t", "0-0", 286894308)
    offsets.commit_offset(zk_session, "g", "t", "1-0", 0)
    offsets.commit_offset(zk_session, "g", "u", "0-3", 5)
    offsets.commit_offset(zk_session, "g", "t", "0-0", 286894400)  # overwrite
    data, stat = zk_client.get("/consumers/g/offsets/t/0-0")
    assert data == b"286894400" and stat.ephemeralOwner == 0
    assert zk_client.get("/consumers/g/offsets/t")[0] is None
    assert offsets.read_offset(zk_session, "g", "t", "0-0") == 286894400
    assert offsets.read_group_offsets(zk_session, "g") == {
        "t": {"0-0": 286894400, "1-0": 0}, "u": {"0-3": 5}}


def test_garbage_offsets_strict_and_lenient(zk_session: ZkSession, zk_client: KazooClient) -> None:
    offsets.commit_offset(zk_session, "g", "t", "0-0", 10)
    zk_client.create("/consumers/g/offsets/t/1-0", b"")  # what samsa's ensure_path leaves
    with pytest.raises(ZnodeDataError):
        offsets.read_offset(zk_session, "g", "t", "1-0")
    with pytest.raises(ZnodeDataError):
        offsets.read_group_offsets(zk_session, "g")
    assert offsets.read_group_offsets(zk_session, "g", strict=False) == {"t": {"0-0": 10}}
