"""Issue 11, Defect 2: after a ZooKeeper connection loss that keeps the session, a member still
sees every join and leave (its watches re-arm), and a stuck member is visible.

Member ``a`` talks to ZooKeeper through a TCP proxy; `TcpProxy.drop_all` cuts its connection
once -- the network blip, ZooKeeper restart or ensemble fail-over of production: kazoo goes
SUSPENDED, reconnects with the same session and has dropped every watcher meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fixtures.waiting import wait_until
from groupkit import GROUP, ScalaMember, drain, fast_config, owners, produce_to
from kazoo.client import KazooClient

from zkconsumer.bench.soak_proxy import TcpProxy
from zkconsumer.consumer import GroupConsumer, Subscription


class States:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_state(self, state: str) -> None:
        self.seen.append(state)


@pytest.fixture
def zk_proxy(zk_server: Any, tcp_proxy: Callable[[int], TcpProxy]) -> TcpProxy:
    """A TCP proxy in front of the test ZooKeeper (the `tcp_proxy` fixture)."""
    return tcp_proxy(zk_server.port)


def _topic(dev_broker: Any, zk_client: KazooClient, partitions: int = 4) -> Any:
    b = dev_broker(num_partitions=partitions)
    for p in range(partitions):
        produce_to(b, "t", p, [f"{p}-0".encode()])
    wait_until(lambda: zk_client.exists(f"/brokers/topics/t/{b.broker_id}"), what="topic")
    return b


def _blip(proxy: TcpProxy, member: GroupConsumer, states: States) -> None:
    """Drop ``member``'s ZooKeeper connection once; wait until it resumed on the same session."""
    session_id = member.session.session_id
    n = len(states.seen)
    assert proxy.drop_all() >= 1
    wait_until(lambda: "SUSPENDED" in states.seen[n:] and member.state == "STABLE"
               and member.session.connected, timeout=15, what="suspended, resumed, stable")
    assert member.session.session_id == session_id  # the session was kept
    assert "SESSION_LOST" not in states.seen[n:]
    wait_until(member.watches_armed, what="watches re-armed")


def test_join_and_leave_after_a_blip_rebalance_at_once(
        dev_broker: Any, zk_client: KazooClient, zk_chroot: str, zk_proxy: TcpProxy,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    _topic(dev_broker, zk_client)
    a = GroupConsumer(fast_config(f"{zk_proxy.address}{zk_chroot}", consumer_id="a"),
                      Subscription(topics={"t": 1}))
    states = States()
    a.add_listener(states)
    a.start()
    try:
        _join_and_leave(zk_client, zk_proxy, a, states, make_consumer)
    finally:
        a.close()


def _join_and_leave(zk_client: KazooClient, zk_proxy: TcpProxy, a: GroupConsumer,
                    states: States, make_consumer: Callable[..., GroupConsumer]) -> None:
    wait_until(lambda: a.owned_partitions() == {"t": ["0-0", "0-1", "0-2", "0-3"]},
               what="a owns all")
    _blip(zk_proxy, a, states)
    # a member joining now gets its partitions within one rebalance: a heard of the join
    b = make_consumer(Subscription(topics={"t": 1}), consumer_id="b")
    wait_until(lambda: a.owned_partitions() == {"t": ["0-0", "0-1"]}
               and b.owned_partitions() == {"t": ["0-2", "0-3"]}, what="2/2 after the blip")
    assert b.stats.failed_rebalances == 0
    got = drain(a, 2) + drain(b, 2)
    assert sorted(m.value for m in got) == [b"0-0", b"1-0", b"2-0", b"3-0"]
    # and a member leaving after a second blip hands its partitions back to a
    _blip(zk_proxy, a, states)
    b.close()
    wait_until(lambda: owners(zk_client, GROUP, "t") == {p: "g1_a-0" for p in
                                                         ("0-0", "0-1", "0-2", "0-3")},
               timeout=15, what="a owns all again after b left")
    assert a.check_assignment() == []


def test_a_member_that_cannot_claim_what_it_is_assigned_says_so(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    _topic(dev_broker, zk_client, partitions=2)
    a = make_consumer(Subscription(topics={"t": 1}), consumer_id="a")
    wait_until(lambda: a.owned_partitions() == {"t": ["0-0", "0-1"]}, what="a owns all")
    assert a.check_assignment() == []
    # a Scala member joins and takes its half, then its ids znode goes while its owner znode
    # stays (a dying member): a is assigned everything again but cannot claim 0-1
    scala = ScalaMember(zk_client, GROUP, "z", topics={"t": 1})
    scala.register()
    wait_until(lambda: a.owned_partitions() == {"t": ["0-0"]}, what="a released its half")
    scala.rebalance_until()
    zk_client.delete(f"/consumers/{GROUP}/ids/{scala.consumer_id}")
    wait_until(lambda: a.check_assignment() == ["t/0-1 is assigned to g1_a-0 but not owned"],
               what="a reports the partition it cannot claim")
    scala.release()
    wait_until(lambda: a.owned_partitions() == {"t": ["0-0", "0-1"]}, timeout=15,
               what="a claims it once the owner znode is gone")
    assert a.check_assignment() == []
