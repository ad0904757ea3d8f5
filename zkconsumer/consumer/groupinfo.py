"""`describe_group`: a group's members, owners, offsets and lag, plus the rebalance check.

What ``zkconsumer group describe`` prints, as data: the union of 0.7's
ConsumerOffsetChecker (committed offset, log end from an offsets request ``-1`` to the
broker, lag = log end - offset in bytes) and VerifyConsumerRebalance (every partition of
every subscribed topic has an owner znode, and its value is the thread id of a live member
that subscribes to the topic) -- plus one check the reference lacks: that owner is the thread
the sorted-range assignment names (a member that missed a change keeps partitions the group
gave to another).

Invariants: read-only (never writes ZooKeeper); a broker that cannot be reached leaves
``log_end``/``lag`` as ``None`` instead of failing the report; members with unreadable ids
values, unreadable broker registrations and unreadable committed offsets are reported as
problems (partitions on a broker missing from ``/brokers/ids`` are unfetchable), not fatal.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.consumer.assignment import assign
from zkconsumer.consumer.view import read_members
from zkconsumer.errors import BrokerConnectionError, BrokerError, ZnodeDataError
from zkconsumer.zk.offsets import read_topic_offsets
from zkconsumer.zk.paths import CONSUMERS, BrokerInfo, owners_path, topic_path
from zkconsumer.zk.registry import read_brokers, read_owners, read_partition_names, read_topics
from zkconsumer.zk.session import ZkSession

__all__ = ["GroupReport", "MemberInfo", "PartitionInfo", "describe_group", "list_groups"]

log = logging.getLogger(__name__)


@dataclass
class MemberInfo:
    consumer_id: str
    registration: str
    threads: dict[str, list[str]]  # topic -> thread ids
    error: str | None = None


@dataclass
class PartitionInfo:
    topic: str
    partition: str
    owner: str | None
    owner_live: bool
    offset: int | None
    log_end: int | None
    lag: int | None


@dataclass
class GroupReport:
    group: str
    members: list[MemberInfo] = field(default_factory=list)
    partitions: list[PartitionInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: subscribed topics no broker has registered: members wait for them (no rebalance
    #: problem, so --verify passes), but the report must say so
    unregistered_topics: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def list_groups(session: ZkSession) -> list[str]:
    """Every group with a znode under ``/consumers``."""
    return session.get_children(CONSUMERS)


def describe_group(session: ZkSession, group: str, *, log_end: bool = True,
                   socket_timeout: float = 5.0) -> GroupReport:
    """Read the group's state (see module docstring)."""
    report = GroupReport(group)
    members, unreadable = read_members(session, group)
    all_topics = read_topics(session)
    live_threads: dict[str, set[str]] = {}
    for cid, tc in sorted(members.items()):
        threads = tc.thread_ids_per_topic(cid, all_topics)
        report.members.append(MemberInfo(cid, tc.db_string(), threads))
        for topic, ids in threads.items():
            live_threads.setdefault(topic, set()).update(ids)
    for cid, why in sorted(unreadable.items()):
        report.members.append(MemberInfo(cid, "", {}, error=why))
        report.problems.append(f"member {cid} has an unreadable registration: {why}")
    topics = set(live_threads) | set(session.get_children(owners_path(group)))
    topics |= set(session.get_children(f"{CONSUMERS}/{group}/offsets"))
    brokers = read_brokers(session)  # unreadable registrations are skipped (logged once)
    clients: dict[int, SimpleConsumer] = {}
    try:
        for topic in sorted(topics):
            _describe_topic(session, group, topic, topic in live_threads,
                            live_threads.get(topic, set()), brokers, clients, socket_timeout,
                            report, log_end)
    finally:
        for c in clients.values():
            c.close()
    report.unregistered_topics = sorted(
        t for t in live_threads if t not in all_topics or not session.get_children(topic_path(t)))
    return report


def _describe_topic(session: ZkSession, group: str, topic: str, subscribed: bool,
                    threads: set[str], brokers: dict[int, BrokerInfo],
                    clients: dict[int, SimpleConsumer], socket_timeout: float,
                    report: GroupReport, log_end: bool = True) -> None:
    owners = read_owners(session, group, topic)
    bad_offsets: list[ZnodeDataError] = []
    offsets = read_topic_offsets(session, group, topic, strict=False, skipped=bad_offsets)
    names = read_partition_names(session, topic)
    # the reference decision every member computes (REFERENCE §2.4): who *should* own what
    expected = assign(names, threads, threads) if threads else {}
    for exc in bad_offsets:
        report.problems.append(f"{topic}/{exc.path.rsplit('/', 1)[-1]}: the committed offset "
                               f"is unreadable ({exc}); members park this partition")
    for name in sorted(set(names) | set(owners) | set(offsets)):
        owner = owners.get(name)
        live = owner is not None and owner in threads
        end = (_log_end(topic, name, brokers, clients, socket_timeout)
               if log_end and name in names else None)
        offset = offsets.get(name)
        lag = end - offset if end is not None and offset is not None else None
        report.partitions.append(PartitionInfo(topic, name, owner, live, offset, end, lag))
        unregistered = name in names and int(name.split("-", 1)[0]) not in brokers
        if subscribed and unregistered:
            report.problems.append(f"{topic}/{name} is on broker {name.split('-', 1)[0]}, "
                                   "which is not registered in /brokers/ids (or its "
                                   "registration is unreadable): no member can fetch it")
        elif subscribed and name in names:
            if owner is None:
                report.problems.append(f"{topic}/{name} has no owner")
            elif not live:
                report.problems.append(f"{topic}/{name} is owned by {owner}, which is not a "
                                       f"live consumer thread of {topic}")
            elif expected.get(name) not in (None, owner):
                # a member that missed a change (deaf after a reconnect, failing rebalances)
                # keeps what the group decided to give someone else
                report.problems.append(f"{topic}/{name} is owned by {owner}, but the "
                                       f"assignment names {expected[name]}")


def _log_end(topic: str, name: str, brokers: dict[int, BrokerInfo],
             clients: dict[int, SimpleConsumer], socket_timeout: float) -> int | None:
    b, _, p = name.partition("-")
    try:
        bid, part = int(b), int(p)
    except ValueError:
        return None
    broker = brokers.get(bid)
    if broker is None:
        return None
    client = clients.get(bid)
    if client is None:
        client = clients[bid] = SimpleConsumer(broker.host, broker.port,
                                               socket_timeout=socket_timeout)
    try:
        return client.latest_offset(topic, part)
    except (BrokerConnectionError, BrokerError) as exc:
        log.warning("log end of %s/%s unknown: %s", topic, name, exc)
        return None
