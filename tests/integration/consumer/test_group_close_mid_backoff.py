"""Close while a rebalance backs off: the member leaves the group at once (issue 18).

Real ZooKeeper and dev brokers.  A member that was killed with -9 (played by a live
`ZkSession` that registered it and created its owner znodes, then "died": the session lives
on until it expires) holds partitions a running member is now assigned, so that member's
rebalance conflicts and backs off (5 s, 4 retries: 20 s if nothing cut it short).  Before,
`close` waited for the remaining attempts and a new rebalance even started after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fixtures.waiting import wait_until
from groupkit import fast_config, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription
from zkconsumer.zk.session import ZkSession

GROUP = "g"
DEAD = f"{GROUP}_x"  # sorts after us: while alone with it, we get the first half
JOINER = f"{GROUP}_a"  # sorts before us: when it joins, our range moves onto DEAD's half


class _States:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def on_state(self, state: str) -> None:
        with self.lock:
            self.seen.append(state)


@pytest.fixture
def backing_off(dev_broker: Any, zk_connect: str, zk_client: KazooClient,
                zk_session_factory: Callable[..., ZkSession],
                ) -> Iterator[tuple[GroupConsumer, _States]]:
    for broker in dev_broker.many(2, num_partitions=4):  # t: 0-0..0-3, 1-0..1-3
        produce_to(broker, "t", 0, [b"m"])
    wait_until(lambda: len(zk_client.get_children("/brokers/topics/t")) == 2,
               what="topic registered by both brokers")
    dead = zk_session_factory()
    assert dead.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/ids/{DEAD}",
                                                 b'{ "t": 1 }')
    consumer = GroupConsumer(fast_config(zk_connect, group=GROUP, consumer_id="m",
                                         rebalance_backoff_ms=5000, rebalance_retries_max=4),
                             Subscription.of("t"))
    states = _States()
    consumer.add_listener(states)
    consumer.start()
    try:
        assert consumer.owned_partitions() == {"t": ["0-0", "0-1", "0-2", "0-3"]}
        # DEAD claimed its half, then was killed -9: its owner znodes stay
        for name in ("1-0", "1-1", "1-2", "1-3"):
            assert dead.create_ephemeral_expect_conflict(
                f"/consumers/{GROUP}/owners/t/{name}", f"{DEAD}-0".encode())
        attempts = consumer.stats.rebalance_attempts
        joiner = zk_session_factory()  # ranges now: a 0-0..0-2, m 0-3..1-1, x 1-2..1-3
        assert joiner.create_ephemeral_expect_conflict(f"/consumers/{GROUP}/ids/{JOINER}",
                                                       b'{ "t": 1 }')
        wait_until(lambda: consumer.stats.rebalance_attempts > attempts
                   and consumer.owned_partitions() == {"t": ["0-3"]}, timeout=10,
                   what="the rebalance conflicting with the dead member's owners")
        yield consumer, states
    finally:
        consumer.close()


def test_close_mid_backoff_leaves_within_a_second(
        backing_off: tuple[GroupConsumer, _States], zk_client: KazooClient) -> None:
    consumer, states = backing_off
    ids = f"/consumers/{GROUP}/ids/{consumer.consumer_id}"
    assert zk_client.exists(ids)
    started = time.monotonic()
    consumer.close(timeout=5.0)
    elapsed = time.monotonic() - started
    assert zk_client.exists(ids) is None
    assert elapsed < 1.0, elapsed
    with states.lock:
        seen = list(states.seen)
    assert seen[-1] == "CLOSED"
    assert "STABLE" not in seen[seen.index("REBALANCING", 2):]  # the backoff never ended
    assert consumer.state == "CLOSED"


def test_close_from_a_listener_does_not_deadlock(
        dev_broker: Any, zk_connect: str, zk_client: KazooClient) -> None:
    """Listeners run on the member's own thread; a close there is handled right after."""
    produce_to(dev_broker(num_partitions=2), "t", 0, [b"m"])
    consumer = GroupConsumer(fast_config(zk_connect, group=GROUP), Subscription.of("t"))

    class CloseOnStable:
        def on_state(self, state: str) -> None:
            if state == "STABLE":
                consumer.close(timeout=5.0)  # returns at once: we are the member's thread

    consumer.add_listener(CloseOnStable())
    try:
        consumer.start()
        wait_until(lambda: consumer.state == "CLOSED", what="closed from its own listener")
        assert zk_client.get_children(f"/consumers/{GROUP}/ids") == []
    finally:
        consumer.close()
