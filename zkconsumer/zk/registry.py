"""Cluster and group reads: who is registered in ZooKeeper, as 0.7 readers see it.

Reads only; the writers are the dev broker (broker registration), the consumer group
(ids and owner znodes) and `zkconsumer.zk.offsets`.

Invariants:

* A znode that disappears between listing its parent and reading it is skipped, not an
  error: ephemeral znodes come and go while we read (a broker or consumer dying).
* A znode that holds garbage raises `ZnodeDataError`, as the Scala readers throw: a silently
  skipped broker or member would make this process compute a different assignment from
  every Scala member of the group.
* Lists are returned in a stable order; partition names in the consumer's *string* order.
"""

from __future__ import annotations

from zkconsumer.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    BrokerInfo,
    TopicCount,
    broker_id_path,
    consumer_id_path,
    consumer_ids_path,
    owner_path,
    owners_topic_path,
    parse_broker_id,
    parse_broker_info,
    parse_partition_count,
    parse_topic_count,
    partition_name,
    topic_broker_path,
)
from zkconsumer.zk.session import ZkSession

__all__ = [
    "read_brokers",
    "read_group_members",
    "read_owners",
    "read_partition_names",
    "read_topic_partitions",
    "read_topics",
]


def read_brokers(session: ZkSession) -> dict[int, BrokerInfo]:
    """``/brokers/ids/*`` -> ``{id: BrokerInfo}`` (ZkUtils.getCluster)."""
    brokers: dict[int, BrokerInfo] = {}
    for child in session.get_children(BROKER_IDS):
        bid = parse_broker_id(child, path=f"{BROKER_IDS}/{child}")
        data = session.get(broker_id_path(bid))
        if data is None:
            continue
        brokers[bid] = parse_broker_info(bid, data)
    return dict(sorted(brokers.items()))


def read_topics(session: ZkSession) -> list[str]:
    """The children of ``/brokers/topics`` (every topic some broker has registered), sorted."""
    return session.get_children(BROKER_TOPICS)


def read_topic_partitions(session: ZkSession, topic: str) -> dict[int, int]:
    """``/brokers/topics/<topic>/*`` -> ``{broker id: number of partitions on it}``."""
    counts: dict[int, int] = {}
    for child in session.get_children(f"{BROKER_TOPICS}/{topic}"):
        path = f"{BROKER_TOPICS}/{topic}/{child}"
        bid = parse_broker_id(child, path=path)
        data = session.get(topic_broker_path(topic, bid))
        if data is None:
            continue
        counts[bid] = parse_partition_count(path, data)
    return dict(sorted(counts.items()))


def read_partition_names(session: ZkSession, topic: str) -> list[str]:
    """``["B-P", ...]`` of a topic, sorted as *strings* (``"10-0" < "2-0"``), exactly the list
    the Scala consumer's rebalance ranges over (ZkUtils.getPartitionsForTopics)."""
    names = [partition_name(b, p) for b, n in read_topic_partitions(session, topic).items()
             for p in range(n)]
    return sorted(names)


def read_group_members(session: ZkSession, group: str) -> dict[str, TopicCount]:
    """``/consumers/<group>/ids/*`` -> ``{consumer id: TopicCount}``, sorted by consumer id."""
    members: dict[str, TopicCount] = {}
    for cid in session.get_children(consumer_ids_path(group)):
        path = consumer_id_path(group, cid)
        data = session.get(path)
        if data is None:
            continue
        members[cid] = parse_topic_count(path, data)
    return members


def read_owners(session: ZkSession, group: str, topic: str) -> dict[str, str]:
    """``/consumers/<group>/owners/<topic>/*`` -> ``{"B-P": owning thread id}``.

    The owner value is the thread id ``<consumerId>-<n>``; it is returned as written (an
    undecodable value is shown with replacement characters rather than hidden)."""
    owners: dict[str, str] = {}
    for pname in session.get_children(owners_topic_path(group, topic)):
        data = session.get(owner_path(group, topic, pname))
        if data is None:
            continue
        owners[pname] = data.decode("utf-8", "replace")
    return owners
