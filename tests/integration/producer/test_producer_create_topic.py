"""Keyed writes to a new topic: create it on every live broker first, or be warned (22.14).

Before: the first keyed send created the topic on one broker (0.7's partition-0 bootstrap)
and every later keyed message stayed on that broker's partitions, silently.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until
from producerkit import read_layout

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.producer import Producer
from zkconsumer.producer.partitioning import BrokerPartition
from zkconsumer.producer.topics import create_on_every_broker
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession
from zkconsumer.zk.watch import watch_exists

ROOT = Path(__file__).resolve().parents[3]
KEYS = [f"user-{i}" for i in range(200)]


def test_created_on_every_broker_keyed_messages_spread(dev_broker: Any,
                                                       zk_session: ZkSession) -> None:
    brokers = dev_broker.many(3, num_partitions=2)
    with Producer(zk_connect=dev_broker.zk_connect, confirm=True) as producer:
        producer.send("keyed", b"x", key="seed")  # the old way: lands on one broker
        first = wait_until(lambda: set(read_topic_partitions(zk_session, "keyed")),
                           what="the first broker registered the topic")
        created = create_on_every_broker(producer, "keyed")
        assert len(first) == 1 and sorted(created) == sorted({0, 1, 2} - first)
        assert read_topic_partitions(zk_session, "keyed") == {0: 2, 1: 2, 2: 2}
        assert create_on_every_broker(producer, "keyed") == []  # idempotent
        for key in KEYS:
            producer.send("keyed", key.encode(), key=key)
    layout = read_layout(brokers, "keyed", 2)
    assert {b for b, _ in layout} == {0, 1, 2}  # every broker got keyed messages
    assert sum(len(v) for v in layout.values()) == len(KEYS) + 1  # and nothing else


def test_a_keyed_send_to_a_topic_on_fewer_brokers_warns_once(
        dev_broker: Any, caplog: pytest.LogCaptureFixture) -> None:
    dev_broker.many(2, num_partitions=2)
    with (Producer(zk_connect=dev_broker.zk_connect, confirm=True) as producer,
          caplog.at_level(logging.WARNING, logger="zkconsumer.producer")):
        producer.send("unspread", b"a", key="k1")
        producer.send("unspread", b"b", key="k2")
        producer.send("other", b"c")  # unkeyed: no warning
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "keyed messages to topic unspread stay on the brokers that have it: it is not "
        "registered on any of the 2 live brokers yet (0.7 never spreads a topic by itself); "
        "create it on every broker first (produce --create-topic, the writer option "
        "createTopic=true, or zkconsumer.producer.topics.create_on_every_broker)"]


def test_produce_create_topic_flag(dev_broker: Any, zk_session: ZkSession) -> None:
    dev_broker.many(2, num_partitions=3)
    result = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "produce", "--zk", dev_broker.zk_connect,
         "--topic", "cli", "--create-topic", "--key-separator", ","],
        input="a,1\nb,2\nc,3\n", cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert read_topic_partitions(zk_session, "cli") == {0: 3, 1: 3}
    assert "produced 3 message(s)" in result.stderr


@contextlib.contextmanager
def watch_events_held(session: ZkSession) -> Iterator[None]:
    """Hold back every watch event of ``session`` (kazoo delivers them on one thread, which a
    watch callback waiting here blocks) until the block ends; reads still work."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(30)

    path = f"/hold-{threading.get_ident()}"
    assert watch_exists(session, path, hold) is False
    session.ensure_persistent(path)  # fires the watch: the event thread enters hold()
    try:
        assert entered.wait(10), "the watch holding the events never fired"
        yield
    finally:
        release.set()
        session.delete(path)


def test_created_topic_is_routed_over_its_registrations_on_return(
        dev_broker: Any, zk_session: ZkSession) -> None:
    """`create_on_every_broker` returns only once the producer routes over what the brokers
    registered -- not over the bootstrap list, which names every broker as well.

    Before: it returned as soon as ZooKeeper showed the topic registered on every broker and
    the *bootstrap* list ``[0-0, 1-0]`` covered every broker, although the producer's view had
    not read the registrations yet (brokers register asynchronously; the view learns of them
    from a watch).  The Spark writer then grouped 400 keyed rows over 2 partitions while the
    producer routed their sends over 4, and every row went to broker 1.  Here the view's watch
    events are held back, so it cannot have read the registrations when the call starts.
    """
    brokers = dev_broker.many(2, num_partitions=2)
    registered = [BrokerPartition(b, p) for b in (0, 1) for p in (0, 1)]
    with Producer(zk_connect=dev_broker.zk_connect, confirm=True) as producer:
        session = producer.zk_session
        assert session is not None
        # First use: bootstrapped, the topic's watch armed (a writer routes before creating).
        assert producer.partitions_for("lagging") == [BrokerPartition(0, 0),
                                                      BrokerPartition(1, 0)]
        with watch_events_held(session):
            for b in brokers:  # the topic appears on both brokers; the view hears nothing
                with BrokerConnection(b.host, b.port) as conn:
                    produce(conn, "lagging", 0, encode_message_set([]), confirm=True)
            wait_until(lambda: read_topic_partitions(zk_session, "lagging") == {0: 2, 1: 2},
                       what="both brokers registered the topic")
            assert create_on_every_broker(producer, "lagging") == []
            assert producer.partitions_for("lagging") == registered
