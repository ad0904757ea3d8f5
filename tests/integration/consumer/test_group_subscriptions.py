"""Wildcard subscriptions, retry after a failed watcher rebalance, suspended connections."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fixtures.waiting import wait_until
from groupkit import GROUP, drain, fast_config, owners, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription
from zkconsumer.devcluster.zookeeper import ZooKeeperServer


def test_whitelist_picks_up_new_topics(dev_broker: Any, zk_client: KazooClient,
                                       make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=2)
    z = make_consumer(Subscription(whitelist="w.*", num_streams=2))
    value, _ = zk_client.get(f"/consumers/{GROUP}/ids/{z.consumer_id}")
    assert value == b"*2*w.*"
    assert z.owned_partitions() == {}
    produce_to(b, "w1", 0, [b"a"])
    produce_to(b, "x1", 0, [b"not mine"])
    wait_until(lambda: z.owned_partitions() == {"w1": ["0-0", "0-1"]},
               what="new matching topic claimed")
    assert owners(zk_client, GROUP, "w1") == {"0-0": f"{z.consumer_id}-0",
                                             "0-1": f"{z.consumer_id}-1"}
    assert [m.value for m in drain(z, 1)] == [b"a"]
    assert owners(zk_client, GROUP, "x1") == {}


def test_failed_watcher_rebalance_is_retried(dev_broker: Any, zk_client: KazooClient,
                                             zk_session_factory: Callable[..., Any],
                                             make_consumer: Callable[..., GroupConsumer]) -> None:
    b0 = dev_broker(num_partitions=1)
    produce_to(b0, "t", 0, [b"x"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    z = make_consumer(Subscription(topics={"t": 1}), rebalance_retries_max=2)
    assert z.owned_partitions() == {"t": ["0-0"]}
    ghost = zk_session_factory()
    assert ghost.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/owners/t/1-0",
                                                  b"g1_ghost-0")
    b1 = dev_broker(num_partitions=1)
    produce_to(b1, "t", 0, [b"y"])  # broker 1 registers t: the watch fires, claim conflicts
    wait_until(lambda: z.stats.failed_rebalances >= 1, what="a failed watcher rebalance")
    assert z.owned_partitions() == {"t": ["0-0"]}  # kept what it could keep
    ghost.close()  # no ZooKeeper event for the group itself: only the retry can fix it
    wait_until(lambda: z.owned_partitions() == {"t": ["0-0", "1-0"]},
               what="retry after backoff succeeded")
    assert sorted(m.value for m in drain(z, 2)) == [b"x", b"y"]


def test_suspended_connection_pauses_delivery(tmp_path: Path, dev_broker: Any) -> None:
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    restarted: ZooKeeperServer | None = None
    z: GroupConsumer | None = None
    try:
        b = dev_broker(num_partitions=1, zk=server.connect_string)
        produce_to(b, "t", 0, [b"m1"])
        z = GroupConsumer(fast_config(server.connect_string, zk_session_timeout_ms=20000),
                          Subscription(topics={"t": 1}))
        states: list[str] = []
        z.add_listener(type("L", (), {"on_state": lambda self, s: states.append(s)})())
        z.start()
        assert [m.value for m in drain(z, 1)] == [b"m1"]
        server.stop()
        wait_until(lambda: "SUSPENDED" in states, what="SUSPENDED reported")
        produce_to(b, "t", 0, [b"m2"])  # the broker is still up: the fetcher may fetch it
        wait_until(lambda: z is not None and z._delivery.queued_chunks() > 0,
                   what="m2 fetched while suspended")
        assert z.poll(timeout=0.3) is None  # ... but not handed out: ownership is unsure
        restarted = ZooKeeperServer(tmp_path / "zk", port=server.port)
        restarted.start()
        wait_until(lambda: "RESUMED" in states, timeout=20, what="same session resumed")
        assert [m.value for m in drain(z, 1)] == [b"m2"]
        assert z.stats.session_expirations == 0
        assert z.owned_partitions() == {"t": ["0-0"]}
    finally:
        if z is not None:
            z.close()
        dev_broker.close()
        if restarted is not None:
            restarted.stop()
        server.stop()
