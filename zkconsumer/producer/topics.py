"""Spreading a topic over every live broker before keyed writes, and warning when it is not.

Why (issue 22 item 14): a 0.7 topic exists on a broker once that broker received a produce
for it; the ZooKeeper-aware producer routes a topic that no broker has yet to partition 0 of
one live broker, which then creates the topic with its ``num.partitions`` and registers it.
From then on the producer sees only that broker's partitions, so every keyed message lands
there -- for good: 0.7 never moves a topic to the other brokers by itself.  The remedy is the
0.7 way of creating a topic: send an (empty) message set to partition 0 of every live broker
that lacks it (the broker creates the log and registers ``/brokers/topics/<t>/<id>``), before
the first keyed write.

Invariants: `create_on_every_broker` writes no message (an empty set appends nothing) and
returns only when ZooKeeper shows the topic registered on every broker that was live *and*
the producer routes over exactly those registrations -- not over the bootstrap list (partition
0 of every live broker) nor a merge of it with some of them -- or raises `ProducerError` at the
deadline naming the brokers missing.  Why exactly: a caller that groups keyed messages by
``default_partition(key, n)`` with ``n = len(partitions_for(topic))`` (the Spark writer) relies
on ``n`` staying what the producer then routes over.  Returning on the bootstrap list, which
already names every broker, let the writer group 400 keyed rows over 2 partitions; the view
then read the 4 registered partitions and the sends -- each routed by one key of its group --
put every row on broker 1.
`spread_warning` costs one ZooKeeper read; the producer asks it once per topic.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.errors import ConfigurationError, ProducerError, ZkConsumerError
from zkconsumer.producer.cluster import ZkClusterView
from zkconsumer.producer.partitioning import BrokerPartition, partitions_from_counts
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_brokers, read_topic_partitions
from zkconsumer.zk.session import ZkSession

__all__ = ["Routing", "create_on_every_broker", "spread_warning"]


class Routing(Protocol):
    """What `create_on_every_broker` needs of a `Producer` (which imports this module, so it
    is named structurally here)."""

    @property
    def zk_session(self) -> ZkSession | None: ...

    def partitions_for(self, topic: str) -> list[BrokerPartition]: ...

    def refresh(self) -> None: ...

log = logging.getLogger(__name__)

_EMPTY = encode_message_set([])


def create_on_every_broker(producer: Routing, topic: str, *, timeout: float = 30.0,
                           poll: float = 0.1) -> list[int]:
    """Make ``topic`` exist on every live broker; returns the ids it was created on now."""
    session = producer.zk_session
    if session is None:
        raise ConfigurationError(f"creating topic {topic!r} on every broker needs zk.connect "
                                 "(a broker.list producer already routes over every broker "
                                 "it lists)")
    brokers = read_brokers(session)
    have = read_topic_partitions(session, topic)
    created = [bid for bid in brokers if bid not in have]
    for bid in created:
        info = brokers[bid]
        try:
            with BrokerConnection(info.host, info.port) as conn:
                produce(conn, topic, 0, _EMPTY, confirm=True)
        except ZkConsumerError as exc:
            raise ProducerError(f"cannot create topic {topic!r} on broker {bid} "
                                f"({info.host}:{info.port}): {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        routed = producer.partitions_for(topic)
        registered = read_topic_partitions(session, topic)
        on = {p.broker_id for p in routed}
        missing = sorted(set(brokers) - (set(registered) & on))
        # Every partition routed over is one a broker registered, with its registered count:
        # no bootstrap (b, 0) is left, and the view has read the registrations read here.
        settled = routed == partitions_from_counts(registered, on)
        if not missing and settled:
            break
        if time.monotonic() >= deadline:
            if missing:
                raise ProducerError(f"topic {topic!r} is still not registered on broker(s) "
                                    f"{missing} after {timeout:g} s")
            raise ProducerError(f"the producer still routes topic {topic!r} over "
                                f"{[str(p) for p in routed]}, not over its registrations "
                                f"{registered}, after {timeout:g} s")
        producer.refresh()
        time.sleep(poll)
    if created:
        log.info("topic %s created on broker(s) %s: it is now on all %d live brokers", topic,
                 created, len(brokers), extra={"event": "topic_created", "topic": topic})
    return created


def spread_warning(view: object, topic: str) -> str | None:
    """Why keyed messages to ``topic`` would stay on fewer brokers than are live, or None
    (one ZooKeeper read: the producer asks once per topic)."""
    if not isinstance(view, ZkClusterView):
        return None  # broker.list: the producer routes over exactly the brokers it lists
    live = set(view.live_brokers)
    try:
        on = set(read_topic_partitions(view.session, topic))
    except ZkConsumerError:
        return None  # ZooKeeper away: the send itself will say so
    if not live or on >= live:
        return None
    where = (f"registered on broker(s) {sorted(on)} of the {len(live)} live"
             if on else f"not registered on any of the {len(live)} live brokers yet")
    return (f"keyed messages to topic {topic} stay on the brokers that have it: it is {where} "
            f"(0.7 never spreads a topic by itself); create it on every broker first "
            f"(produce --create-topic, the writer option createTopic=true, or "
            f"zkconsumer.producer.topics.create_on_every_broker)")
