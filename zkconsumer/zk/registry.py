"""Cluster and group reads: who is registered in ZooKeeper, as 0.7 readers see it.

Reads only; the writers are the dev broker (broker registration), the consumer group
(ids and owner znodes) and `zkconsumer.zk.offsets`.

Invariants:

* A znode that disappears between listing its parent and reading it is skipped, not an
  error: ephemeral znodes come and go while we read (a broker or consumer dying).
* A *broker* znode that holds garbage (``/brokers/ids/N``, ``/brokers/topics/T/N``, a child
  name that is not a number) is skipped with one ERROR per distinct bad value
  (`report_bad_znode`), unless the caller asks for ``strict=True`` (then `ZnodeDataError`,
  as the Scala readers throw).  One bad registration must not stop every consumer, tool and
  report of the cluster: the Scala consumer cannot rebalance at all then (its getCluster
  throws on every attempt), and a broker nobody can parse cannot be fetched from anyway.
  The producer skipped them already.  A skipped ``/brokers/ids/N`` leaves N's partitions
  in the topic's partition list (so every member still computes the reference assignment);
  the consumer does not claim partitions of a broker missing from `read_brokers`.
* Group znodes with garbage (members' ids values) still raise `ZnodeDataError`: the consumer
  treats them in `zkconsumer.consumer.view`.
* Lists are returned in a stable order; partition names in the consumer's *string* order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping

from zkconsumer.errors import ZnodeDataError
from zkconsumer.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    BrokerInfo,
    TopicCount,
    consumer_id_path,
    consumer_ids_path,
    owner_path,
    owners_topic_path,
    parse_broker_id,
    parse_broker_info,
    parse_partition_count,
    parse_topic_count,
    partition_name,
)
from zkconsumer.zk.session import ZkSession

__all__ = [
    "log_once",
    "parse_brokers",
    "parse_topic_partitions",
    "partition_names",
    "read_brokers",
    "read_group_members",
    "read_owners",
    "read_partition_names",
    "read_topic_partitions",
    "read_topics",
    "report_bad_znode",
]

log = logging.getLogger(__name__)

#: Keys already logged by `log_once`; bounded (cleared when full: a repeat is harmless).
_logged: set[Hashable] = set()
_logged_lock = threading.Lock()
_MAX_LOGGED = 4096


def log_once(logger: logging.Logger, level: int, key: Hashable, msg: str, *args: object) -> bool:
    """Log ``msg`` the first time ``key`` is seen in this process; True if it was logged.

    For conditions re-read on every rebalance or refresh (a garbage znode, a partition on an
    unregistered broker): one loud line per distinct bad value, not one per rebalance.
    """
    with _logged_lock:
        if key in _logged:
            return False
        if len(_logged) >= _MAX_LOGGED:
            _logged.clear()
        _logged.add(key)
    logger.log(level, msg, *args)
    return True


def report_bad_znode(session: ZkSession, exc: ZnodeDataError, consequence: str) -> None:
    """ERROR once per (cluster chroot, path, value): what is wrong and what is skipped."""
    chroot = getattr(session.client, "chroot", "")
    log_once(log, logging.ERROR, ("bad-znode", chroot, exc.path, exc.data),
             "ignoring an unreadable broker znode (%s): %s", consequence, exc)


def read_brokers(session: ZkSession, *, strict: bool = False) -> dict[int, BrokerInfo]:
    """``/brokers/ids/*`` -> ``{id: BrokerInfo}`` (ZkUtils.getCluster).

    Unreadable registrations are skipped (logged once) unless ``strict``.
    """
    entries = [(child, session.get(f"{BROKER_IDS}/{child}"))
               for child in session.get_children(BROKER_IDS)]
    return parse_brokers(entries, strict=strict,
                         on_bad=lambda exc: report_bad_znode(session, exc, _BAD_BROKER))


_BAD_BROKER = ("this broker is treated as not registered; its partitions cannot be fetched "
               "until the registration is fixed")


def parse_brokers(entries: Iterable[tuple[str, bytes | None]], *, strict: bool = False,
                  on_bad: Callable[[ZnodeDataError], None] | None = None,
                  ) -> dict[int, BrokerInfo]:
    """`read_brokers` without the reads: ``(child name, data or None if it vanished)``.

    Pure, so the group member's state machine parses what its own reads returned exactly
    as every other reader does.  ``on_bad`` is told of each skipped entry."""
    brokers: dict[int, BrokerInfo] = {}
    for child, data in entries:
        try:
            bid = parse_broker_id(child, path=f"{BROKER_IDS}/{child}")
            if data is None:
                continue
            brokers[bid] = parse_broker_info(bid, data)
        except ZnodeDataError as exc:
            if strict:
                raise
            (on_bad or _log_bad(_BAD_BROKER))(exc)
    return dict(sorted(brokers.items()))


def _log_bad(consequence: str) -> Callable[[ZnodeDataError], None]:
    def report(exc: ZnodeDataError) -> None:
        log_once(log, logging.ERROR, ("bad-znode", exc.path, exc.data),
                 "ignoring an unreadable broker znode (%s): %s", consequence, exc)
    return report


def read_topics(session: ZkSession) -> list[str]:
    """The children of ``/brokers/topics`` (every topic some broker has registered), sorted."""
    return session.get_children(BROKER_TOPICS)


def read_topic_partitions(session: ZkSession, topic: str, *,
                          strict: bool = False) -> dict[int, int]:
    """``/brokers/topics/<topic>/*`` -> ``{broker id: number of partitions on it}``.

    Unreadable entries are skipped (logged once) unless ``strict``: that broker holds no
    partition of the topic as far as readers are concerned.
    """
    entries = [(child, session.get(f"{BROKER_TOPICS}/{topic}/{child}"))
               for child in session.get_children(f"{BROKER_TOPICS}/{topic}")]
    return parse_topic_partitions(
        topic, entries, strict=strict,
        on_bad=lambda exc: report_bad_znode(session, exc, _bad_partitions(topic)))


def _bad_partitions(topic: str) -> str:
    return f"that broker's partitions of {topic} are left out until the registration is fixed"


def parse_topic_partitions(topic: str, entries: Iterable[tuple[str, bytes | None]], *,
                           strict: bool = False,
                           on_bad: Callable[[ZnodeDataError], None] | None = None,
                           ) -> dict[int, int]:
    """`read_topic_partitions` without the reads (see `parse_brokers`)."""
    counts: dict[int, int] = {}
    for child, data in entries:
        path = f"{BROKER_TOPICS}/{topic}/{child}"
        try:
            bid = parse_broker_id(child, path=path)
            if data is None:
                continue
            counts[bid] = parse_partition_count(path, data)
        except ZnodeDataError as exc:
            if strict:
                raise
            (on_bad or _log_bad(_bad_partitions(topic)))(exc)
    return dict(sorted(counts.items()))


def partition_names(counts: Mapping[int, int]) -> list[str]:
    """``{broker: n}`` -> ``["B-P", ...]`` sorted as *strings*, as Scala ranges over them."""
    return sorted(partition_name(b, p) for b, n in counts.items() for p in range(n))


def read_partition_names(session: ZkSession, topic: str, *, strict: bool = False) -> list[str]:
    """``["B-P", ...]`` of a topic, sorted as *strings* (``"10-0" < "2-0"``), exactly the list
    the Scala consumer's rebalance ranges over (ZkUtils.getPartitionsForTopics)."""
    return partition_names(read_topic_partitions(session, topic, strict=strict))


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
