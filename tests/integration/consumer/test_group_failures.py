"""Failures: session expiry, stale owners, retries exhausted, broker death and return."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fixtures.waiting import wait_until
from groupkit import GROUP, drain, offsets, owners, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription
from zkconsumer.errors import RebalanceFailedError


def _topic(dev_broker: Any, zk_client: KazooClient, partitions: int = 4) -> Any:
    b = dev_broker(num_partitions=partitions)
    for p in range(partitions):
        produce_to(b, "t", p, [f"{p}-0".encode()])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    return b


def test_session_expiry_releases_and_rejoins(dev_broker: Any, zk_client: KazooClient,
                                             zk_expire: Callable[..., int],
                                             make_consumer: Callable[..., GroupConsumer]) -> None:
    b = _topic(dev_broker, zk_client)
    z1 = make_consumer(Subscription(topics={"t": 1}), consumer_id="a")
    z2 = make_consumer(Subscription(topics={"t": 1}), consumer_id="b")
    wait_until(lambda: z1.owned_partitions() == {"t": ["0-0", "0-1"]}
               and z2.owned_partitions() == {"t": ["0-2", "0-3"]}, what="2/2")
    got = drain(z1, 2) + drain(z2, 2)
    assert sorted(m.value for m in got) == [b"0-0", b"1-0", b"2-0", b"3-0"]
    states: list[str] = []

    class Rec:
        def on_state(self, state: str) -> None:
            states.append(state)

    z1.add_listener(Rec())
    zk_expire(z1.session)
    # z1 comes back on a new session, commits what it handed out, re-registers, re-splits
    wait_until(lambda: z1.stats.session_expirations == 1, what="z1 handled the expiry")
    wait_until(lambda: z1.owned_partitions() == {"t": ["0-0", "0-1"]}
               and z2.owned_partitions() == {"t": ["0-2", "0-3"]}
               and owners(zk_client, GROUP, "t") == {"0-0": "g1_a-0", "0-1": "g1_a-0",
                                                     "0-2": "g1_b-0", "0-3": "g1_b-0"}
               # the listener hears STABLE after the ownership is in place: wait for it too
               and states[-1:] == ["STABLE"],
               what="2/2 again after expiry")
    assert "SESSION_LOST" in states
    # the acked offsets of z1 were committed, so nothing is replayed
    for p in range(4):
        produce_to(b, "t", p, [f"{p}-1".encode()])
    got = drain(z1, 2) + drain(z2, 2)
    assert sorted(m.value for m in got) == [b"0-1", b"1-1", b"2-1", b"3-1"]


def test_stale_owner_disappearing_during_retries(
        dev_broker: Any, zk_client: KazooClient, zk_session_factory: Callable[..., Any],
        make_consumer: Callable[..., GroupConsumer]) -> None:
    _topic(dev_broker, zk_client, partitions=2)
    ghost = zk_session_factory()  # a dead member's session that has not expired yet
    path = f"/consumers/{GROUP}/owners/t/0-1"
    assert ghost.create_ephemeral_expect_conflict(path, b"g1_ghost-0")
    z = make_consumer(Subscription(topics={"t": 1}), start=False, rebalance_retries_max=50)
    done = threading.Event()
    threading.Thread(target=lambda: (z.start(), done.set()), daemon=True).start()
    wait_until(lambda: z.stats.rebalance_attempts >= 3, what="retrying against the stale owner")
    # all or nothing: while 0-1 is held, 0-0 is claimed at most transiently, never kept
    assert not done.is_set() and z.owned_partitions() == {}
    assert owners(zk_client, GROUP, "t")["0-1"] == "g1_ghost-0"
    ghost.close()  # the stale owner vanishes (session ends)
    wait_until(done.is_set, what="start() succeeded")
    assert z.owned_partitions() == {"t": ["0-0", "0-1"]}
    assert z.stats.failed_rebalances == 0


def test_retries_exhausted(dev_broker: Any, zk_client: KazooClient,
                           zk_session: Any, make_consumer: Callable[..., GroupConsumer]) -> None:
    _topic(dev_broker, zk_client, partitions=2)
    path = f"/consumers/{GROUP}/owners/t/0-0"
    assert zk_session.create_ephemeral_expect_conflict(path, b"g1_ghost-0")
    z = make_consumer(Subscription(topics={"t": 1}), start=False, rebalance_retries_max=3,
                      consumer_id="me")
    with pytest.raises(RebalanceFailedError) as info:
        z.start()
    text = str(info.value)
    assert "g1_me can't rebalance after 3 retries" in text
    assert "group g1" in text and f"{path}=g1_ghost-0" in text
    assert z.stats.rebalance_attempts == 3 and z.stats.failed_rebalances == 1
    # a failed start leaves nothing behind: no registration, no half-claimed owners
    assert zk_client.get_children(f"/consumers/{GROUP}/ids") == []
    assert owners(zk_client, GROUP, "t") == {"0-0": "g1_ghost-0"}


def test_broker_death_and_return(dev_broker: Any, zk_client: KazooClient,
                                 make_consumer: Callable[..., GroupConsumer]) -> None:
    b0 = dev_broker(num_partitions=2)
    b1 = dev_broker(num_partitions=2)
    for b in (b0, b1):
        for p in range(2):
            produce_to(b, "t", p, [f"{b.broker_id}-{p}-0".encode()])
    wait_until(lambda: len(zk_client.get_children("/brokers/topics/t")) == 2, what="topic")
    z = make_consumer(Subscription(topics={"t": 1}))
    assert z.owned_partitions() == {"t": ["0-0", "0-1", "1-0", "1-1"]}
    assert len(drain(z, 4)) == 4
    z.commit()
    b1.stop()
    wait_until(lambda: z.owned_partitions() == {"t": ["0-0", "0-1"]},
               what="broker 1's partitions dropped")
    produce_to(b0, "t", 0, [b"0-0-1"])
    assert [m.value for m in drain(z, 1)] == [b"0-0-1"]
    b1 = dev_broker.restart(b1)
    wait_until(lambda: z.owned_partitions() == {"t": ["0-0", "0-1", "1-0", "1-1"]},
               what="broker 1 back")
    produce_to(b1, "t", 1, [b"1-1-1"])
    # resumes at the committed offsets: only the new message, no replay
    assert [m.value for m in drain(z, 1)] == [b"1-1-1"]
    assert z.poll(timeout=0.3) is None
    z.commit()
    assert offsets(zk_client, GROUP, "t")["1-1"] > 0


def test_session_expiry_during_the_first_rebalance_is_recovered(
        dev_broker: Any, zk_client: KazooClient, zk_expire: Callable[..., int],
        make_consumer: Callable[..., GroupConsumer]) -> None:
    # The first rebalance runs in start()'s thread, before the coordinator thread exists.
    # A session expiry then (found by the fault-injection soak) left every later attempt
    # failing with "ZooKeeper session lost; waiting for a new one" until the retries ran out.
    _topic(dev_broker, zk_client, partitions=2)
    zk_client.ensure_path(f"/consumers/{GROUP}/owners/t")
    zk_client.create(f"/consumers/{GROUP}/owners/t/0-0", b"g1_stale-0", ephemeral=True)
    z = make_consumer(Subscription(topics={"t": 1}), consumer_id="a", start=False,
                      rebalance_backoff_ms=300, rebalance_retries_max=30)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            z.start()
        except BaseException as exc:  # reported below
            errors.append(exc)

    starter = threading.Thread(target=start)
    starter.start()
    wait_until(lambda: z.stats.rebalance_attempts >= 2, what="first rebalance retrying")
    zk_expire(z.session)
    wait_until(lambda: z.stats.session_expirations == 1, timeout=15,
               what="the expiry handled during the first rebalance")
    zk_client.delete(f"/consumers/{GROUP}/owners/t/0-0")
    starter.join(30)
    assert not starter.is_alive() and errors == []
    assert z.owned_partitions() == {"t": ["0-0", "0-1"]}
    assert owners(zk_client, GROUP, "t") == {"0-0": "g1_a-0", "0-1": "g1_a-0"}
