"""Where the producer may send: brokers and the partition list of each topic.

Two implementations of one small interface (`ClusterView`):

`StaticClusterView` (``broker.list``, ConfigBrokerPartitionInfo.scala)
    Each listed broker is one entry ``(id, -1)``: the producer picks a broker and sends
    partition ``-1`` so the broker picks a random partition (KAFKA-161).

`ZkClusterView` (``zk.connect``, ZKBrokerPartitionInfo.scala)
    Reads ``/brokers/ids`` and ``/brokers/topics/<t>`` and keeps them current with watches on
    ``/brokers/ids``, ``/brokers/topics`` and **each used** ``/brokers/topics/<t>`` -- armed the
    moment a topic is first used, bootstrapped or not, so a new topic is never stuck on its
    bootstrap partitions (the 0.7 caveat of REFERENCE §4.7).  Watch callbacks only mark what
    is stale and wake one refresher thread, which re-reads and applies the pure
    `merge_partitions`.  After a session expiry the watches re-arm themselves and a new-session
    listener forces a full re-read.

Invariants: partition lists are replaced, never mutated, so readers need no lock; a list only
contains live brokers (brokers in ``/brokers/ids``), except that a topic's list is never
emptied while brokers exist -- it falls back to the bootstrap list.  The view never installs
a ZooKeeper read older than one it already installed: every read of ``/brokers/ids`` or of a
topic's registrations is made *and installed* under one lock (``_read_lock``), and reads on
one session see ZooKeeper in the order they were issued, so installs follow ZooKeeper's
order.  (Before, a topic's first use read outside any lock and installed its read after the
refresher had read -- and dropped, the topic not being installed yet -- a newer one: the list
stayed on the older registrations until the next watch event.)

Garbage znodes (``/brokers/ids/0 = "garbage"``, ``/brokers/topics/T/0 = "x"``, a child name
that is not a number) are logged at ERROR and *skipped*, unlike the consumer's strict readers
(`zkconsumer.zk.registry`): a producer cannot send to a broker it cannot parse anyway, and one
bad znode must neither stop the producer from starting nor freeze every later refresh (a dead
broker would then never leave the lists).
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Protocol

from zkconsumer.errors import ConfigurationError, ZnodeDataError, ZooKeeperError
from zkconsumer.producer.config import ProducerConfig
from zkconsumer.producer.partitioning import BrokerPartition, merge_partitions
from zkconsumer.protocol import RANDOM_PARTITION
from zkconsumer.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    BrokerInfo,
    broker_id_path,
    parse_broker_id,
    parse_broker_info,
    parse_partition_count,
    topic_broker_path,
    topic_path,
)
from zkconsumer.zk.session import ZkSession
from zkconsumer.zk.watch import ChildrenWatch, watch_children

__all__ = ["ClusterView", "StaticClusterView", "ZkClusterView"]

log = logging.getLogger(__name__)


class ClusterView(Protocol):
    def partitions(self, topic: str) -> list[BrokerPartition]:
        """The sorted partition list of ``topic`` (possibly bootstrapped); may be empty."""
        ...

    def broker(self, broker_id: int) -> tuple[str, int] | None:
        """``(host, port)`` of a live broker, or None."""
        ...

    def request_refresh(self) -> None:
        """Something failed: re-read the cluster soon (no-op for a static list)."""
        ...

    def close(self) -> None: ...


class StaticClusterView:
    """``broker.list`` mode: fixed brokers, partition chosen by the broker."""

    def __init__(self, config: ProducerConfig) -> None:
        brokers = sorted(config.static_brokers, key=lambda b: b.id)
        self._addresses = {b.id: (b.host, b.port) for b in brokers}
        self._partitions = [BrokerPartition(b.id, RANDOM_PARTITION) for b in brokers]

    def partitions(self, topic: str) -> list[BrokerPartition]:
        return self._partitions

    def broker(self, broker_id: int) -> tuple[str, int] | None:
        return self._addresses.get(broker_id)

    def request_refresh(self) -> None:
        return None

    def close(self) -> None:
        return None


def zk_session(config: ProducerConfig) -> ZkSession:
    """A `ZkSession` (not started) with the producer's ZooKeeper settings."""
    assert config.zk_connect is not None
    return ZkSession(config.zk_connect, session_timeout_ms=config.zk_session_timeout_ms,
                     connection_timeout_ms=config.zk_connection_timeout_ms,
                     security=config.zk_security)


class ZkClusterView:
    """ZooKeeper mode: brokers and topic partitions kept current by watches."""

    def __init__(self, config: ProducerConfig, *, retry_wait: float = 0.5,
                 session: ZkSession | None = None) -> None:
        """Connect and load the brokers.  ``session``: a `ZkSession` made (not started) by the
        caller from ``config``, who may then close it from another thread to abandon a
        connection attempt that takes long (`ZkSession.start` raises)."""
        if config.zk_connect is None:
            raise ConfigurationError("zk.connect is required for a ZooKeeper cluster view")
        self._read_retries = config.zk_read_num_retries
        self._retry_wait = retry_wait
        self.session = session or zk_session(config)
        self.session.start()
        self._lock = threading.Lock()
        #: Held across each ZooKeeper read *and* its install (module docstring: monotonic).
        self._read_lock = threading.Lock()
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, list[BrokerPartition]] = {}
        self._counts: dict[str, dict[int, int]] = {}
        self._watches: dict[str, ChildrenWatch] = {}
        self._watch_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._stale_brokers = False
        self._stale_topics: set[str] = set()
        #: Bumped after every applied change (lets tests and tools wait for a refresh).
        self.generation = 0
        try:
            self._reload_brokers()
            self.session.add_new_session_listener(self._on_new_session)
            self._watches[BROKER_IDS] = watch_children(self.session, BROKER_IDS,
                                                       self._on_brokers_changed)
            self._watches[BROKER_TOPICS] = watch_children(self.session, BROKER_TOPICS,
                                                          self._on_topics_changed)
        except BaseException:
            self.session.close()
            raise
        self._thread = threading.Thread(target=self._run, name="producer-zk-refresh",
                                        daemon=True)
        self._thread.start()

    # -- ClusterView -------------------------------------------------------------------------

    def partitions(self, topic: str) -> list[BrokerPartition]:
        current = self._topics.get(topic)
        if current is not None:
            return current
        # First use: arm the watch *before* reading so no registration can slip between.
        with self._watch_lock:
            if topic not in self._watches:
                self._watches[topic] = watch_children(self.session, topic_path(topic),
                                                      functools.partial(self._on_topic, topic))
        with self._read_lock:
            current = self._topics.get(topic)
            if current is not None:  # the refresher installed it meanwhile
                return current
            counts = _read_topic_partitions(self.session, topic)
            with self._lock:
                current = merge_partitions((), counts, self._brokers)
                self._counts[topic] = counts
                self._topics[topic] = current
                self.generation += 1
        if not counts:
            log.info("topic %s is new: bootstrapping on partition 0 of brokers %s", topic,
                     sorted(b.broker_id for b in current))
        return current

    def broker(self, broker_id: int) -> tuple[str, int] | None:
        info = self._brokers.get(broker_id)
        attempts = 0
        while info is None and attempts < self._read_retries:
            attempts += 1  # zk.read.num.retries: our cache may just be behind
            try:
                self._reload_brokers()
            except ZooKeeperError as exc:
                log.warning("cannot re-read brokers from ZooKeeper: %s", exc)
                break
            info = self._brokers.get(broker_id)
        return (info.host, info.port) if info is not None else None

    @property
    def live_brokers(self) -> dict[int, BrokerInfo]:
        return dict(self._brokers)

    def request_refresh(self) -> None:
        with self._lock:
            self._stale_brokers = True
            self._stale_topics.update(self._topics)
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        for watch in self._watches.values():
            watch.cancel()
        self._thread.join(timeout=10)
        self.session.close()

    # -- watch callbacks (kazoo's event thread: only mark and wake) ---------------------------

    def _on_brokers_changed(self, _children: list[str]) -> None:
        self._stale_brokers = True
        self._wake.set()

    def _on_topics_changed(self, _children: list[str]) -> None:
        # A newly registered topic: its own watch fires too, but re-reading every topic we
        # use is cheap and covers a watch that could not be re-armed in time.
        with self._lock:
            self._stale_topics.update(self._topics)
        self._wake.set()

    def _on_topic(self, topic: str, _children: list[str]) -> None:
        self._mark_topic(topic)

    def _mark_topic(self, topic: str) -> None:
        with self._lock:
            self._stale_topics.add(topic)
        self._wake.set()

    def _on_new_session(self) -> None:
        log.info("producer's ZooKeeper session was replaced: re-reading brokers and topics")
        self.request_refresh()

    # -- refresher thread --------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self._refresh_once()
            except ZooKeeperError as exc:
                log.warning("refreshing the cluster from ZooKeeper failed (%s); retrying", exc)
                self.request_refresh()
                self._stop.wait(self._retry_wait)
            except Exception:  # the refresher must survive garbage znodes and bugs alike
                log.exception("unexpected error refreshing the cluster from ZooKeeper")
                self._stop.wait(self._retry_wait)

    def _refresh_once(self) -> None:
        with self._lock:
            stale_brokers, self._stale_brokers = self._stale_brokers, False
            topics, self._stale_topics = self._stale_topics, set()
        try:
            if stale_brokers:
                self._reload_brokers()
            for topic in sorted(topics):
                with self._read_lock:
                    counts = _read_topic_partitions(self.session, topic)
                    with self._lock:
                        self._counts[topic] = counts
                        self._apply(topic)
        except BaseException:
            with self._lock:  # nothing stale may be forgotten
                self._stale_brokers |= stale_brokers
                self._stale_topics |= topics
            raise

    def _reload_brokers(self) -> None:
        with self._read_lock:
            brokers = _read_brokers(self.session)
            with self._lock:
                if brokers == self._brokers:
                    return
                gone = sorted(set(self._brokers) - set(brokers))
                new = sorted(set(brokers) - set(self._brokers))
                self._brokers = brokers
                if gone or new:
                    log.info("live brokers now %s (gone: %s, new: %s)", sorted(brokers), gone,
                             new)
                for topic in self._topics:
                    self._apply(topic)
                self.generation += 1

    def _apply(self, topic: str) -> None:
        """Recompute one topic's list from its counts and the live brokers (lock held)."""
        old = self._topics.get(topic)
        if old is None:
            return
        new = merge_partitions(old, self._counts.get(topic, {}), self._brokers)
        if new != old:
            log.info("partitions of %s: %s -> %s", topic, [str(p) for p in old],
                     [str(p) for p in new])
            self._topics[topic] = new
            self.generation += 1


# -- lenient registry reads (garbage is skipped, see the module docstring) ------------------------


def _read_brokers(session: ZkSession) -> dict[int, BrokerInfo]:
    """``/brokers/ids/*`` -> ``{id: BrokerInfo}``; vanished and garbage znodes are skipped."""
    brokers: dict[int, BrokerInfo] = {}
    for child in session.get_children(BROKER_IDS):
        try:
            bid = parse_broker_id(child, path=f"{BROKER_IDS}/{child}")
            data = session.get(broker_id_path(bid))
            if data is not None:
                brokers[bid] = parse_broker_info(bid, data)
        except ZnodeDataError as exc:
            log.error("ignoring a broker registration the producer cannot use: %s", exc)
    return dict(sorted(brokers.items()))


def _read_topic_partitions(session: ZkSession, topic: str) -> dict[int, int]:
    """``/brokers/topics/<topic>/*`` -> ``{broker: partition count}``; garbage skipped."""
    counts: dict[int, int] = {}
    for child in session.get_children(f"{BROKER_TOPICS}/{topic}"):
        path = f"{BROKER_TOPICS}/{topic}/{child}"
        try:
            bid = parse_broker_id(child, path=path)
            data = session.get(topic_broker_path(topic, bid))
            if data is not None:
                counts[bid] = parse_partition_count(path, data)
        except ZnodeDataError as exc:
            log.error("ignoring a topic registration the producer cannot use: %s", exc)
    return dict(sorted(counts.items()))
