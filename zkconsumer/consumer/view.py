"""`read_view`: one consistent-enough read of what a rebalance decides from.

REFERENCE §2.4 steps 1-3: every member of ``/consumers/G/ids`` with its thread ids per topic
(both ids forms: JSON ``{ "t": n }`` and wildcard ``*n*regex`` / ``!n!regex`` expanded against
the children of ``/brokers/topics`` with a full match), and the partitions ``"B-P"`` of each
of my topics from ``/brokers/topics/T/*``.

Choice where the reference fails: a member whose ids value cannot be parsed makes every
Scala member's rebalance throw (and fail after its retries).  We log an ERROR naming it and
treat it as a member with *no threads*.  That stays safe: ownership is still arbitrated by
the owner znodes, so if that member (or a Scala member that can read its value) does own
partitions, our claim on them conflicts and is rolled back; the worst case is a failed
attempt, which is what the reference gives anyway.

Partitions on a broker that is not in ``/brokers/ids`` (not registered, or its registration
is unreadable and skipped by `zkconsumer.zk.registry`) stay in the partition lists, so every
member -- Scala ones too -- computes the same reference assignment; `GroupView.assignable`
then drops them from *this* member's decision with one ERROR per distinct set: nobody can
fetch them, so claiming them would only hide them behind an owner znode.  They stay unowned
(``group describe`` says why) until the broker registers and the group rebalances; the other
partitions are claimed and consumed as usual.  (The reference fails the whole rebalance of
the member they fall to: IllegalStateException "Broker N is unavailable".)

Invariants: a member or broker znode that vanishes between listing and reading is skipped
(it is leaving; its departure fires the watch and we rebalance again); our own registration
must be in the view, else `ConsumerError` fails the attempt (the reference throws too).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from zkconsumer.consumer.assignment import assign_topics
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.errors import ConsumerError, ZnodeDataError
from zkconsumer.zk.paths import (
    BrokerInfo,
    TopicCount,
    consumer_id_path,
    consumer_ids_path,
    parse_topic_count,
)
from zkconsumer.zk.registry import log_once, read_brokers, read_partition_names, read_topics
from zkconsumer.zk.session import ZkSession

__all__ = ["GroupView", "need_all_topics", "parse_members", "read_members", "read_view",
           "view_threads"]

log = logging.getLogger(__name__)


@dataclass
class GroupView:
    """What one rebalance attempt sees."""

    members: dict[str, TopicCount]
    all_topics: list[str]
    my_threads: dict[str, list[str]]          # my topic -> my thread ids
    threads: dict[str, list[str]]             # my topic -> every member's thread ids
    partitions: dict[str, list[str]]          # my topic -> "B-P" names
    brokers: dict[int, BrokerInfo]
    unreadable: dict[str, str] = field(default_factory=dict)  # consumer id -> why

    def decide(self) -> dict[tuple[str, str], str]:
        """``{(topic, "B-P"): my thread id}`` -- the reference assignment for my threads."""
        per_topic = assign_topics(self.partitions, self.threads, self.my_threads)
        return {(topic, name): thread for topic, m in per_topic.items()
                for name, thread in m.items()}

    def assignable(self, decision: dict[tuple[str, str], str], group: str,
                   consumer_id: str) -> dict[tuple[str, str], str]:
        """``decision`` without the partitions of unregistered brokers (module docstring).

        Logs one ERROR per distinct set of such partitions, not one per rebalance.
        """
        keep: dict[tuple[str, str], str] = {}
        dropped: dict[int, list[str]] = {}
        for (topic, name), thread in decision.items():
            broker = int(name.split("-", 1)[0])
            if broker in self.brokers:
                keep[(topic, name)] = thread
            else:
                dropped.setdefault(broker, []).append(f"{topic}/{name}")
        for broker, names in sorted(dropped.items()):
            log_once(log, logging.ERROR,
                     ("unassignable", group, consumer_id, broker, tuple(sorted(names))),
                     "group %s: %s not claimed by %s: broker %s holds them in /brokers/topics "
                     "but is not registered in /brokers/ids (or its registration is "
                     "unreadable); they stay unowned until it registers and the group "
                     "rebalances", group, ", ".join(sorted(names)), consumer_id, broker)
        return keep


def read_members(session: ZkSession, group: str) -> tuple[dict[str, TopicCount], dict[str, str]]:
    """Every registered member's `TopicCount`, and the unreadable ones with the reason."""
    return parse_members(group, [(cid, session.get(consumer_id_path(group, cid)))
                                 for cid in session.get_children(consumer_ids_path(group))])


def parse_members(group: str, entries: Iterable[tuple[str, bytes | None]],
                  ) -> tuple[dict[str, TopicCount], dict[str, str]]:
    """`read_members` without the reads: ``(consumer id, data or None if it vanished)``."""
    members: dict[str, TopicCount] = {}
    unreadable: dict[str, str] = {}
    for cid, data in entries:
        path = consumer_id_path(group, cid)
        if data is None:
            continue
        try:
            members[cid] = parse_topic_count(path, data)
        except ZnodeDataError as exc:
            log.error("group %s: member %s has an unreadable registration, treating it as "
                      "having no threads (Scala members cannot rebalance until it is fixed): %s",
                      group, cid, exc)
            unreadable[cid] = str(exc)
    return members, unreadable


def need_all_topics(mine: TopicCount, members: dict[str, TopicCount]) -> bool:
    """True if the view must list ``/brokers/topics`` (some member subscribes by filter)."""
    return mine.is_wildcard or any(tc.is_wildcard for tc in members.values())


def view_threads(group: str, consumer_id: str, mine: TopicCount,
                 members: dict[str, TopicCount], all_topics: list[str],
                 ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(my threads per topic, every member's threads per my topic)``; `ConsumerError` if
    our own registration is missing (the reference throws too)."""
    if consumer_id not in members:
        raise ConsumerError(f"group {group}: our registration {consumer_id} is missing from "
                            f"{consumer_ids_path(group)}")
    my_threads = mine.thread_ids_per_topic(consumer_id, all_topics)
    threads: dict[str, list[str]] = {t: [] for t in my_threads}
    for cid, tc in members.items():
        for topic, ids in tc.thread_ids_per_topic(cid, all_topics).items():
            if topic in threads:
                threads[topic].extend(ids)
    return my_threads, threads


def read_view(session: ZkSession, group: str, consumer_id: str,
              subscription: Subscription) -> GroupView:
    """Read members, topics, partitions and brokers for one rebalance attempt."""
    members, unreadable = read_members(session, group)
    mine = subscription.topic_count
    all_topics = read_topics(session) if need_all_topics(mine, members) else []
    my_threads, threads = view_threads(group, consumer_id, mine, members, all_topics)
    partitions = {topic: read_partition_names(session, topic) for topic in my_threads}
    brokers = read_brokers(session)
    return GroupView(members, all_topics, my_threads, threads, partitions, brokers, unreadable)
