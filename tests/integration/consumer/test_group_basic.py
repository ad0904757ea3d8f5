"""One or two zkconsumer members against real ZooKeeper and dev brokers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fixtures.waiting import wait_until
from groupkit import GROUP, drain, offsets, owners, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription


def test_single_member_consumes_and_commits(dev_broker: Any, zk_client: KazooClient,
                                            make_consumer: Callable[..., GroupConsumer]) -> None:
    broker = dev_broker(num_partitions=2)
    produce_to(broker, "t", 0, [b"a0", b"a1"])
    produce_to(broker, "t", 1, [b"b0"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic registered")
    consumer = make_consumer(Subscription(topics={"t": 1}))
    # registration is Scala's exact bytes
    value, stat = zk_client.get(f"/consumers/{GROUP}/ids/{consumer.consumer_id}")
    assert value == b'{ "t": 1 }' and stat.ephemeralOwner != 0
    assert consumer.owned_partitions() == {"t": ["0-0", "0-1"]}
    assert owners(zk_client, GROUP, "t") == {"0-0": f"{consumer.consumer_id}-0",
                                            "0-1": f"{consumer.consumer_id}-0"}
    got = drain(consumer, 3)
    assert sorted(m.value for m in got) == [b"a0", b"a1", b"b0"]
    by_part = {m.partition: m for m in got}
    consumer.commit()
    assert offsets(zk_client, GROUP, "t") == {"0-0": by_part["0-0"].next_offset,
                                             "0-1": by_part["0-1"].next_offset}
    consumer.close()
    # close ends the session: owners and ids vanish at once
    assert owners(zk_client, GROUP, "t") == {}
    assert zk_client.get_children(f"/consumers/{GROUP}/ids") == []
