"""Fetch-path behaviour: big messages, out-of-range resets, timeouts, acks, compression."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fixtures.waiting import wait_until
from groupkit import GROUP, ScalaMember, drain, offsets, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription
from zkconsumer.errors import ConsumerTimeoutError, MessageTooLargeError
from zkconsumer.protocol import Compression


def _wait_topic(zk_client: KazooClient, topic: str = "t") -> None:
    wait_until(lambda: zk_client.exists(f"/brokers/topics/{topic}/0"), what="topic registered")


def test_message_larger_than_fetch_size(dev_broker: Any, zk_client: KazooClient,
                                        make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=2)
    produce_to(b, "t", 0, [b"small", b"B" * 3000])
    produce_to(b, "t", 1, [b"x"])
    _wait_topic(zk_client)
    z = make_consumer(Subscription(topics={"t": 1}), fetch_size=1024, max_fetch_size=8192)
    got = drain(z, 3)
    # the 3000-byte message needed a bigger fetch: grown up to max.fetch.size
    assert sorted(len(m.value) for m in got) == [1, 5, 3000]
    produce_to(b, "t", 0, [b"H" * 20000, b"after"])
    produce_to(b, "t", 1, [b"y"])
    errors: list[MessageTooLargeError] = []
    values: list[bytes] = []

    def step() -> bool:
        try:
            m = z.poll(timeout=0.2)
        except MessageTooLargeError as exc:
            errors.append(exc)
            return False
        if m is not None:
            values.append(m.value)
        return bool(errors) and b"y" in values

    wait_until(step, what="MessageTooLargeError and partition 1 still consumed")
    exc = errors[0]
    assert exc.topic == "t" and exc.partition == "0-0"
    assert exc.offset == max(m.next_offset for m in got if m.partition == "0-0")
    assert "max.fetch.size=8192" in str(exc)
    # the other partition keeps being fetched
    produce_to(b, "t", 1, [b"z"])
    assert [m.value for m in drain(z, 1)] == [b"z"]
    assert z.stats.partitions["t/0-0"]["error"] is not None


def test_offset_out_of_range_resets_and_writes_zk(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=1)
    produce_to(b, "t", 0, [b"m0", b"m1"])
    _wait_topic(zk_client)
    ScalaMember(zk_client, GROUP, "old").commit("t", "0-0", 999_999)
    z = make_consumer(Subscription(topics={"t": 1}), autocommit_enable=False)
    # reset to smallest, written to ZooKeeper at once even with autocommit off (reference)
    wait_until(lambda: offsets(zk_client, GROUP, "t") == {"0-0": 0}, what="reset written")
    assert [m.value for m in drain(z, 2)] == [b"m0", b"m1"]


def test_largest_reset_without_committed_offset(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=1)
    produce_to(b, "t", 0, [b"old"])
    _wait_topic(zk_client)
    z = make_consumer(Subscription(topics={"t": 1}), autooffset_reset="largest")
    wait_until(lambda: z.stats.partitions["t/0-0"]["fetched"] is not None,
               what="largest offset resolved")
    # not written to ZooKeeper at claim time (reference) ...
    assert offsets(zk_client, GROUP, "t") == {}
    produce_to(b, "t", 0, [b"new"])
    assert [m.value for m in drain(z, 1)] == [b"new"]
    z.commit()
    assert offsets(zk_client, GROUP, "t")["0-0"] > 0


def test_consumer_timeout_keeps_iterator_usable(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=1)
    produce_to(b, "t", 0, [b"first"])
    _wait_topic(zk_client)
    z = make_consumer(Subscription(topics={"t": 1}), consumer_timeout_ms=150)
    it = iter(z)
    assert next(it).value == b"first"
    with pytest.raises(ConsumerTimeoutError):
        next(it)
    produce_to(b, "t", 0, [b"second"])
    assert next(it).value == b"second"
    z.close()
    with pytest.raises(StopIteration):
        next(it)


def test_manual_ack_and_compressed_replay(dev_broker: Any, zk_client: KazooClient,
                                          make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=1)
    produce_to(b, "t", 0, [b"p0", b"p1"])
    produce_to(b, "t", 0, [b"c0", b"c1", b"c2"], compression=Compression.GZIP)
    _wait_topic(zk_client)
    z = make_consumer(Subscription(topics={"t": 1}), auto_ack=False, consumer_id="a")
    got = drain(z, 5)
    assert [m.value for m in got] == [b"p0", b"p1", b"c0", b"c1", b"c2"]
    wrapper_start = got[2].offset
    # inner messages: all but the last carry the wrapper start as next_offset
    assert [m.next_offset for m in got[2:4]] == [wrapper_start, wrapper_start]
    assert got[4].next_offset > wrapper_start
    z.commit()
    # nothing acknowledged yet: the start position (from autooffset.reset) is written, as
    # Scala's first autocommit would
    assert offsets(zk_client, GROUP, "t") == {"0-0": 0}
    z.ack(got[3])  # acks p0, p1, c0, c1 -- but c1's position is the wrapper start
    z.commit()
    assert offsets(zk_client, GROUP, "t") == {"0-0": wrapper_start}
    z.close()
    z2 = make_consumer(Subscription(topics={"t": 1}), auto_ack=False, consumer_id="b")
    # the whole compressed set is replayed, the acknowledged plain messages are not
    assert [m.value for m in drain(z2, 3)] == [b"c0", b"c1", b"c2"]
    # an ack of a message from a partition we no longer own (stale) is ignored
    z2.close()
    z2.ack(got[4])
    assert offsets(zk_client, GROUP, "t") == {"0-0": wrapper_start}
