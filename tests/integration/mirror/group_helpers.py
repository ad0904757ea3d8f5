"""Counting consumers for the translate / rollback / playbook tests: a 0.7 group member and a
modern group member that each consume an exact number of messages and commit exactly that."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from mirror_helpers import committed, log_ends

from zkconsumer.client import SimpleConsumer
from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.zk.registry import read_brokers
from zkconsumer.zk.session import ZkSession

#: how long a counting consumer waits for one more message after it got what it expected
QUIET_S = 2.0


def source_values(zk_connect: str, topic: str, *, group: str | None = None) -> Counter[bytes]:
    """Payloads of ``topic`` in the 0.7 cluster; with ``group``, only those at or past the
    group's committed offsets (what a restarted member would be handed)."""
    at = committed(zk_connect, group, topic) if group else {}
    with ZkSession(zk_connect) as s:
        brokers = read_brokers(s)
    out: Counter[bytes] = Counter()
    for name, end in log_ends(zk_connect, topic).items():
        b, p = (int(x) for x in name.split("-"))
        with SimpleConsumer(brokers[b].host, brokers[b].port) as c:
            out.update(m.value for m in c.iter_messages(topic, p, at.get(name, 0))
                       if m.offset < end)
    return out


def consume07(zk_connect: str, group: str, topics: Iterable[str], count: int | None, *,
              expected: int | None = None, timeout: float = 60.0) -> list[bytes]:
    """A 0.7 group member: ``count`` messages then commit and leave; ``count=None``: read to
    the end -- ``expected`` messages, then nothing more for `QUIET_S` -- and commit."""
    config = ConsumerConfig(group_id=group, zk_connect=zk_connect, autocommit_enable=False,
                            rebalance_backoff_ms=200)
    got: list[bytes] = []
    with GroupConsumer(config, Subscription(topics=dict.fromkeys(topics, 1))) as member:
        deadline = time.monotonic() + timeout
        want = count if count is not None else expected
        assert want is not None
        while len(got) < want and time.monotonic() < deadline:
            got += [m.value for m in member.poll_batch(want - len(got), 1.0)]
        if count is None:  # anything beyond what was expected shows up now
            got += [m.value for m in member.poll_batch(100000, QUIET_S)]
        member.commit()
    return got


def consume_target(bootstrap: str, group: str, topic: str, count: int | None, *,
                   expected: int | None = None, timeout: float = 60.0) -> list[bytes]:
    """A modern group member on the group's committed offsets (assigned: no join to wait
    for): ``count`` records then commit exactly those; ``count=None``: to the end as in
    `consume07`."""
    from confluent_kafka import Consumer, TopicPartition

    from zkconsumer.mirror.targets import KafkaAdmin

    n = KafkaAdmin([bootstrap]).partition_count(topic)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    try:
        consumer.assign(consumer.committed([TopicPartition(topic, p) for p in range(n)],
                                           timeout=30))
    except BaseException:
        consumer.close()
        raise
    return drain(consumer, count, expected=expected or 0, timeout=timeout)


def drain(consumer: Any, count: int | None, *, expected: int = 0,
          timeout: float = 60.0) -> list[bytes]:
    """Poll a confluent-kafka consumer for ``count`` records (or: ``expected``, then nothing
    more for `QUIET_S`), commit exactly what it got, close it."""
    from confluent_kafka import TopicPartition

    got: list[bytes] = []
    last: dict[tuple[str, int], int] = {}
    want = count if count is not None else expected
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            if len(got) >= want:
                if count is not None:
                    break
                quiet_until = quiet_until or time.monotonic() + QUIET_S
                if time.monotonic() > quiet_until:
                    break
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            got.append(msg.value())
            last[(msg.topic(), msg.partition())] = msg.offset()
        if last:
            consumer.commit(offsets=[TopicPartition(t, p, o + 1) for (t, p), o in last.items()],
                            asynchronous=False)
    finally:
        consumer.close()
    return got
