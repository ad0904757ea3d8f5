"""Which subscribed topics no broker has registered: made visible, never silently waited on.

A member subscribed to a topic that does not exist (a typo in ``--topic``, a topic no
producer has written yet) registers, owns nothing of it and waits -- correctly, as a 0.7
member does: the first broker that creates the topic registers ``/brokers/topics/<t>/<id>``
and every member rebalances.  But waiting must not be invisible, so `TopicPresence` says it:

* a WARNING naming the topics after every rebalance while they are missing (the first one is
  at start), and an INFO line when one appears;
* `missing` for the ``zkconsumer_unregistered_topics`` gauge, and `annotate` for the
  ``/healthz`` text (the member stays *healthy*: this is not its fault, and a restart would
  not help).

"Registered" means at least one broker znode under ``/brokers/topics/<t>``: a topic whose
brokers all deregistered is as unconsumable as one never created.  Only static subscriptions
(``--topic``) are checked; a whitelist or blacklist names no topic that could be missing.

Invariants: `check` reads ZooKeeper and so runs only where that is allowed (the consumer's
rebalance thread, through the ``on_state("STABLE")`` listener `watch` installs); a read that
fails keeps the previous answer.  `missing` and `annotate` never block (any thread).
"""

from __future__ import annotations

import logging

from zkconsumer.consumer import GroupConsumer
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.paths import topic_path
from zkconsumer.zk.session import ZkSession

__all__ = ["TopicPresence"]

log = logging.getLogger(__name__)


class TopicPresence:
    """Tracks the topics of a static subscription that no broker has registered."""

    def __init__(self, subscription: Subscription) -> None:
        self._topics = sorted(subscription.topics) if not subscription.is_wildcard else []
        self._missing: tuple[str, ...] = ()

    @property
    def missing(self) -> tuple[str, ...]:
        """Subscribed topics without a broker in ``/brokers/topics/<t>`` at the last check."""
        return self._missing

    def check(self, session: ZkSession) -> tuple[str, ...]:
        """Re-read ZooKeeper; log what is (still) missing and what appeared."""
        if not self._topics:
            return ()
        try:
            missing = tuple(t for t in self._topics if not session.get_children(topic_path(t)))
        except ZkConsumerError as exc:
            log.debug("cannot check the subscribed topics: %s", exc)
            return self._missing
        for topic in sorted(set(self._missing) - set(missing)):
            log.info("topic %s is now registered by a broker", topic,
                     extra={"event": "topic_registered", "topic": topic})
        self._missing = missing
        if missing:
            log.warning("subscribed topic(s) %s not registered by any broker in ZooKeeper "
                        "(no %s/<broker id>): nothing to consume there until a broker has "
                        "the topic (a typo in --topic?)", ", ".join(missing),
                        topic_path(missing[0]),
                        extra={"event": "topics_unregistered", "topics": list(missing)})
        return missing

    def annotate(self, reason: str) -> str:
        """``reason`` plus the missing topics, for ``/healthz`` (unchanged if none)."""
        missing = self._missing
        if not missing:
            return reason
        return f"{reason}; topic(s) not registered by any broker: {', '.join(missing)}"

    def watch(self, consumer: GroupConsumer) -> None:
        """Check after every completed rebalance of ``consumer`` (its rebalance thread)."""
        consumer.add_listener(_OnStable(self, consumer))


class _OnStable:
    """Consumer listener: `TopicPresence.check` when a rebalance completed.

    A topic that appears triggers a rebalance (every member watches ``/brokers/topics/<t>``
    of its topics), so checking after each one is enough to notice it.
    """

    def __init__(self, presence: TopicPresence, consumer: GroupConsumer) -> None:
        self._presence = presence
        self._consumer = consumer

    def on_state(self, state: str) -> None:
        if state == "STABLE":
            self._presence.check(self._consumer.session)
