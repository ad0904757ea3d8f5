"""``zkconsumer mirror translate``: a 0.7 group stopped mid-topic (and mid-compressed-set)
continues on the target with a subscribed confluent-kafka consumer, for a renamed and a
merged topic: it gets exactly what the 0.7 group had not consumed (merged partitions may
replay what the plan reports)."""

from __future__ import annotations

import time
from collections import Counter

from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer import cli
from zkconsumer.client import SimpleConsumer
from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.protocol import Compression
from zkconsumer.zk.registry import read_brokers
from zkconsumer.zk.session import ZkSession


def unconsumed(zk_connect: str, topic: str, group: str) -> list[bytes]:
    """Source payloads at or past the group's committed offsets (what it had not consumed)."""
    at = committed(zk_connect, group, topic)
    with ZkSession(zk_connect) as s:
        brokers = read_brokers(s)
    out: list[bytes] = []
    for name, end in log_ends(zk_connect, topic).items():
        b, p = (int(x) for x in name.split("-"))
        with SimpleConsumer(brokers[b].host, brokers[b].port) as c:
            out += [m.value for m in c.iter_messages(topic, p, at.get(name, 0))
                    if m.offset < end]
    return out


def subscribed_read(bootstrap: str, group: str, topics: list[str], expected: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "session.timeout.ms": 6000})
    got: list[bytes] = []
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + 60
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
                quiet_since = time.monotonic()
            elif len(got) >= expected and time.monotonic() - quiet_since > 2.0:
                break
    finally:
        consumer.close()
    return got


def test_translate_positions_a_target_group_where_the_07_group_stopped(
        zk_connect, dev_broker, tansu, start_mirror, capsys) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "orders", [f"o-{i}".encode() for i in range(400)], chunk=10,
            codec=Compression.GZIP)
    produce(zk_connect, "a", [f"a-{i}".encode() for i in range(200)], chunk=10)
    produce(zk_connect, "b", [f"b-{i}".encode() for i in range(200)], chunk=10,
            codec=Compression.SNAPPY)
    # the 0.7 group consumes part of each topic: 137 is not a multiple of the set size, so
    # it stops inside a compressed set of "orders" (its commit replays that set)
    config = ConsumerConfig(group_id="billing", zk_connect=zk_connect, autocommit_enable=False)
    for topic, count in (("orders", 137), ("a", 61), ("b", 53)):
        with GroupConsumer(config, Subscription(topics={topic: 1})) as g07:
            got = 0
            while got < count:
                got += len(g07.poll_batch(count - got, 10.0))
            g07.commit()
    create_topic(tansu.bootstrap, "orders-new", 2)
    create_topic(tansu.bootstrap, "merged", 2)
    m = start_mirror(tansu.url, topics=["orders", "a", "b"], group="m",
                     topic_map={"orders": "orders-new", "a": "merged", "b": "merged"})
    wait_until(lambda: all(committed(zk_connect, "m", t) == log_ends(zk_connect, t)
                           for t in ("orders", "a", "b")), timeout=60, what="the mirror")
    m.stop()

    args = ["translate", "--zk", zk_connect, "--group", "billing", "--mirror-group", "m",
            "--to", tansu.url, "--target-group", "billing-new",
            "--topic-map", "orders:orders-new,a:merged,b:merged"]
    assert cli.main(["mirror", *args]) == 0
    dry = capsys.readouterr()
    assert "dry run" in dry.err and "target topic" in dry.out
    assert cli.main(["mirror", *args, "--apply"]) == 0
    plan = capsys.readouterr().out
    replayed = sum(int(line.split()[4]) for line in plan.splitlines()[1:]
                   if line.startswith("merged"))

    want_orders = Counter(unconsumed(zk_connect, "orders", "billing"))
    got_orders = Counter(subscribed_read(tansu.bootstrap, "billing-new", ["orders-new"],
                                         sum(want_orders.values())))
    assert got_orders == want_orders  # exactly the rest: no gap, no replay
    assert sum(want_orders.values()) < 400  # the group had consumed some

    want_merged = Counter(unconsumed(zk_connect, "a", "billing")
                          + unconsumed(zk_connect, "b", "billing"))
    got_merged = Counter(subscribed_read(tansu.bootstrap, "billing-new", ["merged"],
                                         sum(want_merged.values())))
    assert not want_merged - got_merged  # no gap
    # a and b share the merged partitions: what a consumer sees beyond the rest is exactly
    # the replay the plan announced
    assert sum((got_merged - want_merged).values()) == replayed
    assert all(c == 1 for c in got_merged.values())

    # refusals: a live member of the 0.7 group, and a group ahead of what the mirror copied
    with GroupConsumer(config, Subscription(topics={"orders": 1})) as live:
        assert cli.main(["mirror", *args]) == 1
        assert "still has live members" in capsys.readouterr().err
        assert cli.main(["mirror", *args, "--force"]) == 0
        capsys.readouterr()
        produce(zk_connect, "orders", [b"late"] * 10)
        got = 0
        while got < sum(want_orders.values()) + 10:
            got += len(live.poll_batch(1000, 10.0))
        live.commit()
    assert cli.main(["mirror", *args, "--apply"]) == 1
    err = capsys.readouterr().err
    assert "refused: orders/" in err and "bytes behind" in err
