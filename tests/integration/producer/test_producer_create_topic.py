"""Keyed writes to a new topic: create it on every live broker first, or be warned (22.14).

Before: the first keyed send created the topic on one broker (0.7's partition-0 bootstrap)
and every later keyed message stayed on that broker's partitions, silently.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until
from producerkit import read_layout

from zkconsumer.producer import Producer
from zkconsumer.producer.topics import create_on_every_broker
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

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
