"""Members joining and leaving: clean close, kill -9 of a process member, session expiry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fixtures.waiting import wait_until
from groupkit import GROUP, ProcMember, drain, offsets, owners, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription


def test_join_and_clean_leave(dev_broker: Any, zk_client: KazooClient,
                              make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=4)
    for p in range(4):
        produce_to(b, "t", p, [b"m"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    z1 = make_consumer(Subscription(topics={"t": 1}), consumer_id="a")
    assert z1.owned_partitions() == {"t": ["0-0", "0-1", "0-2", "0-3"]}
    revoked: list[dict[str, list[str]]] = []

    class Rec:
        def on_revoked(self, parts: dict[str, list[str]]) -> None:
            revoked.append(parts)

    z1.add_listener(Rec())
    z2 = make_consumer(Subscription(topics={"t": 1}), consumer_id="b")
    wait_until(lambda: z1.owned_partitions() == {"t": ["0-0", "0-1"]}
               and z2.owned_partitions() == {"t": ["0-2", "0-3"]}, what="split 2/2")
    assert revoked == [{"t": ["0-2", "0-3"]}]  # only what moved; 0-0/0-1 kept
    assert owners(zk_client, GROUP, "t") == {"0-0": "g1_a-0", "0-1": "g1_a-0",
                                            "0-2": "g1_b-0", "0-3": "g1_b-0"}
    z1.close()
    wait_until(lambda: z2.owned_partitions() == {"t": ["0-0", "0-1", "0-2", "0-3"]},
               what="z2 takes over after a clean close")
    assert sorted(m.partition for m in drain(z2, 4)) == ["0-0", "0-1", "0-2", "0-3"]


def test_kill_minus_nine_member(dev_broker: Any, zk_client: KazooClient,
                                make_consumer: Callable[..., GroupConsumer],
                                proc_members: Callable[..., ProcMember]) -> None:
    b = dev_broker(num_partitions=4)
    for p in range(4):
        produce_to(b, "t", p, [f"{p}-{i}".encode() for i in range(20)])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    z = make_consumer(Subscription(topics={"t": 1}))
    victim = proc_members(session_ms=1500)
    wait_until(lambda: victim.consumer_id is not None, timeout=30, what="process member ready")
    wait_until(lambda: len(z.owned_partitions().get("t", [])) == 2, what="split with process")
    theirs = {p for p, t in owners(zk_client, GROUP, "t").items() if not t.startswith(z.consumer_id)}
    assert len(theirs) == 2
    wait_until(lambda: len(victim.messages()) == 40, what="process member consumed its share")
    # let its autocommit write what it handed out, then kill it hard
    ends = {p: max(nxt for part, _, nxt, _ in victim.messages() if part == p) for p in theirs}
    wait_until(lambda: all(offsets(zk_client, GROUP, "t").get(p) == ends[p] for p in theirs),
               what="victim committed")
    victim.kill()
    # its ephemerals linger until the session times out, then z takes everything over
    wait_until(lambda: len(z.owned_partitions().get("t", [])) == 4, timeout=20,
               what="survivor owns all after kill -9")
    for p in theirs:
        produce_to(b, "t", int(p.split("-")[1]), [b"after"])
    got = drain(z, 40 + 2)
    # nothing the victim committed is replayed; the new messages arrive
    assert sorted(m.value for m in got if m.partition in theirs) == [b"after", b"after"]
