"""The ZooKeeper-aware producer against real ZooKeeper and real dev brokers."""

from __future__ import annotations

import os
from typing import Any

import pytest
from fixtures.waiting import wait_until
from kazoo.client import KazooClient
from producerkit import read_layout, read_values

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.errors import DeliveryError, InvalidTopicError, MessageTooLargeError
from zkconsumer.producer import BrokerPartition as BP
from zkconsumer.producer import Producer
from zkconsumer.protocol import Compression, default_partition, encode_message_set


def make_producer(zk_connect: str, **kwargs: Any) -> Producer:
    kwargs.setdefault("confirm", True)
    kwargs.setdefault("retry_backoff_ms", 10)
    return Producer(zk_connect=zk_connect, **kwargs)


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(dev_broker: Any, codec: Compression) -> None:
    broker = dev_broker(topic_partitions={"rt": 1})
    with make_producer(dev_broker.zk_connect, compression_codec=codec) as producer:
        producer.send("rt", [b"m1", b"m2", b"m3"])
        producer.send("rt", b"m4")
        assert producer.stats.messages_sent == 4 and producer.stats.bytes_sent == 8
    assert read_values(broker, "rt", 0) == [b"m1", b"m2", b"m3", b"m4"]


def test_new_topic_bootstraps_on_partition_0_then_spreads(dev_broker: Any) -> None:
    b0, b1 = dev_broker.many(2, num_partitions=4)
    draws = iter([0, 1])  # unkeyed sends: first to index 0, then index 1
    producer = make_producer(dev_broker.zk_connect, rng=lambda n: next(draws) % n)
    try:
        # nobody has the topic: partition 0 of every live broker
        assert producer.partitions_for("fresh") == [BP(0, 0), BP(1, 0)]
        producer.send("fresh", b"to-broker-0")
        # broker 0 registers 4 partitions; broker 1 keeps its virtual (1,0): reference vector
        wait_until(lambda: producer.partitions_for("fresh") == [
            BP(0, 0), BP(0, 1), BP(0, 2), BP(0, 3), BP(1, 0)], what="merge after broker 0")
        producer.send("fresh", b"to-broker-1")  # index 1 of the merged list = (0,1)
        producer.send("fresh", b"bootstrap-of-1", key=_key_for_index(4, 5))
        wait_until(lambda: len(producer.partitions_for("fresh")) == 8,
                   what="both brokers registered")
        assert producer.partitions_for("fresh") == [BP(b, p) for b in (0, 1) for p in range(4)]
    finally:
        producer.close()
    assert read_layout([b0, b1], "fresh", 4) == {
        (0, 0): [b"to-broker-0"], (0, 1): [b"to-broker-1"], (1, 0): [b"bootstrap-of-1"]}


def _key_for_index(index: int, n: int) -> str:
    """A key the Java hash sends to ``index`` of an ``n``-long list."""
    return next(k for k in (f"k{i}" for i in range(10_000)) if default_partition(k, n) == index)


def test_keyed_sends_land_where_the_java_hash_says(dev_broker: Any) -> None:
    brokers = dev_broker.many(2, num_partitions=3)
    for b in brokers:  # both brokers have the topic (and register it) before we start
        with BrokerConnection(b.host, b.port) as conn:
            produce(conn, "keyed", 0, encode_message_set([b"warm"]), confirm=True)
    with make_producer(dev_broker.zk_connect) as producer:
        wait_until(lambda: len(producer.partitions_for("keyed")) == 6, what="registration")
        parts = producer.partitions_for("keyed")
        assert parts == [BP(b, p) for b in (0, 1) for p in range(3)]
        keys = ["alice", "bob", "carol", "dave", "user-42", "\u00e9t\u00e9"]
        for key in keys:
            producer.send("keyed", [key.encode(), b"again:" + key.encode()], key=key)
    layout = read_layout(brokers, "keyed", 3)
    for key in keys:
        bp = parts[default_partition(key, 6)]
        values = layout[(bp.broker_id, bp.partition)]
        assert key.encode() in values and b"again:" + key.encode() in values
        # one send() -> one partition: both messages adjacent
        i = values.index(key.encode())
        assert values[i + 1] == b"again:" + key.encode()


def test_broker_death_and_return(dev_broker: Any) -> None:
    b0, b1 = dev_broker.many(2, topic_partitions={"life": 1})
    with make_producer(dev_broker.zk_connect, partitioner="round-robin") as producer:
        producer.send("life", b"warm-0", key=_key_for_index(0, 2))
        producer.send("life", b"warm-1", key=_key_for_index(1, 2))
        wait_until(lambda: producer.partitions_for("life") == [BP(0, 0), BP(1, 0)],
                   what="both registered")
        b1.stop()  # clean stop: its ephemeral znodes vanish
        wait_until(lambda: producer.partitions_for("life") == [BP(0, 0)], what="b1 removed")
        for i in range(4):
            producer.send("life", b"while-down-%d" % i)
        b1 = dev_broker.restart(b1)
        wait_until(lambda: producer.partitions_for("life") == [BP(0, 0), BP(1, 0)],
                   what="b1 back")
        for i in range(4):
            producer.send("life", b"after-%d" % i)  # round robin reaches b1 again
        assert producer.stats.failed == 0
    v0, v1 = read_values(b0, "life", 0), read_values(b1, "life", 0)
    assert [v for v in v0 if v.startswith(b"while-down")] == [b"while-down-%d" % i
                                                             for i in range(4)]
    assert sorted(v for v in v0 + v1 if v.startswith(b"after")) == [b"after-%d" % i
                                                                   for i in range(4)]
    assert any(v.startswith(b"after") for v in v1)


def test_killed_broker_is_retried_elsewhere(broker_process: Any) -> None:
    p0, p1 = broker_process.many(2, topic_partitions={"crash": 1})
    sleeps: list[float] = []
    producer = make_producer(broker_process.zk_connect, sleep=sleeps.append,
                             connect_timeout_ms=1000, socket_timeout_ms=2000)
    try:
        producer.send("crash", b"a", key=_key_for_index(0, 2))
        producer.send("crash", b"b", key=_key_for_index(1, 2))
        wait_until(lambda: len(producer.partitions_for("crash")) == 2, what="registered")
        p1.kill()  # SIGKILL: its znodes linger until its ZooKeeper session times out
        key = _key_for_index(1, 2)
        producer.send("crash", b"rerouted", key=key)  # routed to the dead broker first
        assert producer.stats.retried == 1 and sleeps == [0.01]
    finally:
        producer.close()
    assert read_values(p0, "crash", 0)[-1] == b"rerouted"


def test_stale_registration_rejection_is_retried_or_reported(dev_broker: Any,
                                                            zk_client: KazooClient) -> None:
    broker = dev_broker(num_partitions=2)
    with make_producer(dev_broker.zk_connect) as producer:
        producer.send("stale", b"create")
        wait_until(lambda: len(producer.partitions_for("stale")) == 2, what="registration")
    # ZooKeeper now claims 4 partitions: (0,2) and (0,3) do not exist on the broker
    zk_client.set("/brokers/topics/stale/0", b"4")
    with make_producer(dev_broker.zk_connect, num_retries=0) as strict:
        assert len(strict.partitions_for("stale")) == 4
        with pytest.raises(DeliveryError, match="rejected") as info:
            strict.send("stale", [b"x", b"y"], key=_key_for_index(3, 4))
        assert info.value.messages == [b"x", b"y"] and strict.stats.failed == 2
    draws = iter([3, 0])
    with make_producer(dev_broker.zk_connect, num_retries=3,
                       rng=lambda n: next(draws) % n) as retrying:
        retrying.send("stale", b"saved")  # (0,3) rejected, retried on a live partition
        assert retrying.stats.retried == 1 and retrying.stats.failed == 0
    values = read_values(broker, "stale", 0) + read_values(broker, "stale", 1)
    assert sorted(values) == [b"create", b"saved"]


def test_producer_session_expiry_rewatches(dev_broker: Any, zk_expire: Any) -> None:
    dev_broker(num_partitions=1)
    with make_producer(dev_broker.zk_connect) as producer:
        assert producer.partitions_for("exp") == [BP(0, 0)]
        assert producer.zk_session is not None
        zk_expire(producer.zk_session, wait_reconnect=True)
        b1 = dev_broker(num_partitions=2)  # a new broker after the expiry
        wait_until(lambda: producer.partitions_for("exp") == [BP(0, 0), BP(1, 0)],
                   what="new broker seen on the new session")
        producer.send("exp", b"on-new-broker", key=_key_for_index(1, 2))
        wait_until(lambda: producer.partitions_for("exp") == [BP(0, 0), BP(1, 0), BP(1, 1)],
                   what="topic watch re-armed on the new session")
    assert read_values(b1, "exp", 0) == [b"on-new-broker"]


def test_producer_sees_new_brokers_after_a_connection_blip(
        dev_broker: Any, zk_server: Any, zk_chroot: str, tcp_proxy: Any) -> None:
    # Issue 11, Defect 2 (producer side): the connection drops and comes back with the same
    # session; kazoo dropped the watchers meanwhile, which must re-arm.
    dev_broker(num_partitions=1)
    proxy = tcp_proxy(zk_server.port)
    with make_producer(f"{proxy.address}{zk_chroot}") as producer:
        assert producer.partitions_for("blip") == [BP(0, 0)]
        session = producer.zk_session
        assert session is not None
        sid = session.session_id
        states: list[str] = []
        session.add_state_listener(lambda state: states.append(state.value))
        assert proxy.drop_all() >= 1
        wait_until(lambda: states[-2:] == ["SUSPENDED", "CONNECTED"], timeout=15,
                   what="suspended, then reconnected")
        assert session.session_id == sid
        b1 = dev_broker(num_partitions=2)  # a new broker after the blip
        wait_until(lambda: producer.partitions_for("blip") == [BP(0, 0), BP(1, 0)],
                   what="new broker seen after the blip")
        producer.send("blip", b"on-new-broker", key=_key_for_index(1, 2))
    assert read_values(b1, "blip", 0) == [b"on-new-broker"]


def test_client_side_checks(dev_broker: Any) -> None:
    dev_broker()
    with make_producer(dev_broker.zk_connect, max_message_size=100) as producer:
        with pytest.raises(MessageTooLargeError, match=r"max\.message\.size=100"):
            producer.send("chk", [b"ok", b"x" * 101])
        with pytest.raises(InvalidTopicError):
            producer.send("a/b", b"x")
        with pytest.raises(TypeError):
            producer.send("chk", ["text"])  # type: ignore[list-item]
        assert producer.stats.requests == 0
    with make_producer(dev_broker.zk_connect, max_message_size=100,
                       compression_codec=Compression.GZIP) as gz:
        gz.send("chk", b"z" * 1000)  # compresses far below the limit: fine
        with pytest.raises(MessageTooLargeError, match="compressed"):
            gz.send("chk", os.urandom(1000))  # incompressible
