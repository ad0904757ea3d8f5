"""The producer against dead, hung and garbage-registered brokers: nothing is lost silently.

Every message handed to ``send`` ends up either stored by a broker or reported (``on_error``,
``stats.failed``, `DeliveryError` from ``flush``), ``close(timeout)`` returns in about that
time however the brokers behave, and no producer thread outlives ``close``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from fixtures.waiting import wait_until
from kazoo.client import KazooClient
from robustkit import ScriptedBroker, blackhole, no_new_threads

from zkconsumer.client import BrokerConnection, SimpleConsumer, produce
from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.errors import DeliveryError
from zkconsumer.producer import BrokerPartition as BP
from zkconsumer.producer import Producer
from zkconsumer.protocol import encode_message_set


def _values(broker: Any, topic: str) -> list[bytes]:
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10.0) as consumer:
        return [m.value for m in consumer.iter_messages(topic, 0, 0)]



def test_garbage_broker_and_topic_znodes_are_skipped_not_fatal(
        dev_broker: Any, zk_client: KazooClient) -> None:
    b0 = dev_broker(topic_partitions={"g": 1})
    zk_client.create("/brokers/ids/7", b"garbage", ephemeral=True)
    zk_client.create("/brokers/ids/x", b"1:127.0.0.1:1", ephemeral=True)
    zk_client.create("/brokers/topics/g/7", b"x", ephemeral=True, makepath=True)
    # before: ZnodeDataError from the constructor (one bad znode stopped the whole producer)
    producer = Producer(zk_connect=dev_broker.zk_connect, confirm=True, retry_backoff_ms=10)
    try:
        assert producer.partitions_for("g") == [BP(0, 0)]
        producer.send("g", b"first")
        # before: every refresh failed on the garbage, so a new broker was never seen
        b1 = dev_broker(topic_partitions={"g": 1})
        with BrokerConnection(b1.host, b1.port) as conn:  # b1 registers "g" on first use
            produce(conn, "g", 0, encode_message_set([b"direct"]), confirm=True)
        wait_until(lambda: producer.partitions_for("g") == [BP(0, 0), BP(1, 0)],
                   what="broker 1 seen despite the garbage znodes")
        zk_client.set("/brokers/topics/g/0", b"not-a-count")
        b1.stop()
        wait_until(lambda: producer.partitions_for("g") == [BP(0, 0)],
                   what="stopped broker 1 dropped despite the garbage znodes")
        producer.send("g", b"second")
        assert producer.stats.failed == 0
        assert producer._view._thread.is_alive()  # type: ignore[union-attr]
    finally:
        producer.close()
    assert _values(b0, "g") == [b"first", b"second"]


def test_async_with_every_broker_dead_reports_every_message() -> None:
    errors: list[tuple[str, list[bytes], Exception]] = []
    dead = restartable_port()
    with no_new_threads():
        producer = Producer(broker_list=f"0:127.0.0.1:{dead},1:127.0.0.1:{dead}",
                            producer_type="async", batch_size=7, num_retries=2,
                            retry_backoff_ms=1,
                            on_error=lambda t, m, e: errors.append((t, m, e)))
        for i in range(20):
            producer.send("lost", b"m%d" % i)
        with pytest.raises(DeliveryError) as info:
            producer.flush(10)
        failed = [p for _, msgs in info.value.messages for p in msgs]  # type: ignore[attr-defined]
        assert sorted(failed) == sorted(b"m%d" % i for i in range(20))
        assert f"127.0.0.1:{dead}" in str(errors[0][2])
        producer.send("lost", b"late")
        started = time.monotonic()
        producer.close(5)
        assert time.monotonic() - started < 5
    assert producer.stats.failed == 21 and producer.stats.messages_sent == 0
    assert sorted(p for _, msgs, _ in errors for p in msgs) == sorted([*failed, b"late"])


def test_async_close_with_a_hung_broker_is_bounded_and_reports_the_rest() -> None:
    """A broker that accepts and never answers: close(timeout) must not wait for
    socket.timeout.ms per batch (30 s by default), and what it gives up on is reported."""
    hung = ScriptedBroker(blackhole)
    errors: list[tuple[str, list[bytes], Exception]] = []
    try:
        with no_new_threads():
            producer = Producer(broker_list=f"0:{hung.address}", producer_type="async",
                                confirm=True, batch_size=2, queue_time_ms=1, num_retries=3,
                                on_error=lambda t, m, e: errors.append((t, m, e)))
            for i in range(6):
                producer.send("hung", b"m%d" % i)
            wait_until(lambda: hung.accepted >= 1, what="first batch in flight")
            started = time.monotonic()
            producer.close(0.5)
            # before: close() blocked on the in-flight request's 30 s socket timeout, then the
            # sender thread kept going (and reconnecting) after close() had returned
            assert time.monotonic() - started < 5
        accepted = hung.accepted
        assert producer.stats.failed == 6
        assert sorted(p for _, msgs, _ in errors for p in msgs) == [b"m%d" % i
                                                                   for i in range(6)]
        with pytest.raises(DeliveryError) as info:
            producer.flush()
        assert sum(len(m) for _, m in info.value.messages) == 6  # type: ignore[attr-defined]
        assert hung.accepted == accepted == 1  # no connection opened after close
    finally:
        hung.close()
