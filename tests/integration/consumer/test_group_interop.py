"""Mixed groups: Scala-format members (played by the test) and zkconsumer members converge.

The Scala side is `groupkit.ScalaMember`: exact Scala ids bytes (JSON and wildcard forms),
owner value = thread id, release-all-then-claim-all-or-nothing, assignment computed by a
second, independent implementation of REFERENCE §2.4.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fixtures.waiting import wait_until
from groupkit import GROUP, ScalaMember, drain, owners, produce_to, reference_assignment
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription


def expected_owners(client: KazooClient, topic: str) -> dict[str, str]:
    """The whole group's assignment as every member computes it from the current view."""
    cids = client.get_children(f"/consumers/{GROUP}/ids")
    helper = ScalaMember(client, GROUP, "observer")
    threads: list[str] = []
    for cid in cids:
        value, _ = client.get(f"/consumers/{GROUP}/ids/{cid}")
        threads += helper._threads_of(cid, value, client.get_children("/brokers/topics")).get(
            topic, [])
    parts = []
    for b in client.get_children(f"/brokers/topics/{topic}"):
        parts += [f"{b}-{p}" for p in range(int(client.get(f"/brokers/topics/{topic}/{b}")[0]))]
    return reference_assignment(parts, threads, threads)


def start_in_background(consumer: GroupConsumer) -> threading.Thread:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            consumer.start()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.errors = errors  # type: ignore[attr-defined]
    return t


def test_mixed_group_converges(dev_broker: Any, zk_client: KazooClient,
                               make_consumer: Callable[..., GroupConsumer]) -> None:
    b0 = dev_broker(num_partitions=3)
    b1 = dev_broker(num_partitions=3)
    for b in (b0, b1):
        for p in range(3):
            produce_to(b, "t", p, [f"{b.broker_id}-{p}-{i}".encode() for i in range(5)])
    wait_until(lambda: len(zk_client.get_children("/brokers/topics/t")) == 2,
               what="both brokers registered t")

    s1 = ScalaMember(zk_client, GROUP, "scala1", topics={"t": 1})
    s1.register()
    s1.rebalance_until()
    assert len(s1.owned) == 6

    z1 = make_consumer(Subscription(topics={"t": 2}), start=False)
    starter = start_in_background(z1)
    # The Scala member sees the new member (its watch) and rebalances: it releases 4 of 6.
    wait_until(lambda: zk_client.exists(f"/consumers/{GROUP}/ids/{z1.consumer_id}"),
               what="z1 registered")
    s1.rebalance_until()
    starter.join(10)
    assert not starter.errors, starter.errors  # type: ignore[attr-defined]

    def converged() -> bool:
        want = expected_owners(zk_client, "t")
        mine = {p: t for p, t in want.items() if t.startswith(z1.consumer_id)}
        return (owners(zk_client, GROUP, "t") == want
                and z1.owned_partitions().get("t", []) == sorted(mine))

    wait_until(converged, what="group converged with 1 scala + 1 zkconsumer (2 streams)")
    # thread ids: zkconsumer contributes <cid>-0 and <cid>-1, and they appear as owner values
    assert {t for t in owners(zk_client, GROUP, "t").values()
            if t.startswith(z1.consumer_id)} == {f"{z1.consumer_id}-0", f"{z1.consumer_id}-1"}
    n_mine = sum(len(v) for v in z1.owned_partitions().values())
    got = drain(z1, 5 * n_mine)
    assert {m.partition for m in got} == set(z1.owned_partitions()["t"])

    # A second Scala member with a wildcard registration joins.
    s2 = ScalaMember(zk_client, GROUP, "scala2", wildcard="*1*t|nothing")
    s2.register()
    s1.rebalance_until()
    s2.rebalance_until()
    wait_until(converged, what="converged after a wildcard scala member joined")
    s1.rebalance_until()
    s2.rebalance_until()
    assert owners(zk_client, GROUP, "t") == expected_owners(zk_client, "t")

    # A second zkconsumer member joins; the Scala members follow the protocol.
    z2 = make_consumer(Subscription(whitelist="t"), start=False)
    starter = start_in_background(z2)
    wait_until(lambda: zk_client.exists(f"/consumers/{GROUP}/ids/{z2.consumer_id}"),
               what="z2 registered")
    s1.rebalance_until()
    s2.rebalance_until()
    starter.join(10)
    assert not starter.errors, starter.errors  # type: ignore[attr-defined]

    def converged_all() -> bool:
        want = expected_owners(zk_client, "t")
        for z in (z1, z2):
            mine = sorted(p for p, t in want.items() if t.startswith(z.consumer_id + "-"))
            if z.owned_partitions().get("t", []) != mine:
                return False
        return owners(zk_client, GROUP, "t") == want

    wait_until(converged_all, what="converged with 2 scala + 2 zkconsumer members")
    assert len(zk_client.get_children(f"/consumers/{GROUP}/ids")) == 4

    # Scala members leave; the zkconsumer members take everything over.
    s1.unregister()
    s2.unregister()
    wait_until(converged_all, what="zkconsumer members own everything after scala left")
    assert set(owners(zk_client, GROUP, "t")) == {f"{b}-{p}" for b in (0, 1) for p in range(3)}


def test_unparsable_member_is_survived(dev_broker: Any, zk_client: KazooClient,
                                       make_consumer: Callable[..., GroupConsumer]) -> None:
    b0 = dev_broker(num_partitions=2)
    produce_to(b0, "t", 0, [b"x"])
    produce_to(b0, "t", 1, [b"y"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic registered")
    zk_client.ensure_path(f"/consumers/{GROUP}/ids")
    zk_client.create(f"/consumers/{GROUP}/ids/{GROUP}_broken", b"{ not json", ephemeral=True)
    z = make_consumer(Subscription(topics={"t": 1}))
    # treated as a member with no threads: we own everything
    assert z.owned_partitions() == {"t": ["0-0", "0-1"]}
    assert sorted(m.value for m in drain(z, 2)) == [b"x", b"y"]


def test_offsets_hand_over_between_scala_and_zkconsumer(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=2)
    for p in range(2):
        produce_to(b, "t", p, [f"m{p}-{i}".encode() for i in range(3)])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    scala = ScalaMember(zk_client, GROUP, "scala1", topics={"t": 1})
    scala.register()
    scala.rebalance_until()
    # the Scala member processed the first message of 0-0 and committed: 4 + 6 + 4 bytes
    scala.commit("t", "0-0", 14)
    scala.unregister()
    z = make_consumer(Subscription(topics={"t": 1}))
    got = drain(z, 5)
    by_part: dict[str, list[bytes]] = {}
    for m in got:
        by_part.setdefault(m.partition, []).append(m.value)
    assert by_part == {"0-0": [b"m0-1", b"m0-2"], "0-1": [b"m1-0", b"m1-1", b"m1-2"]}
    z.close()  # commits: the next (Scala) owner must be able to read what we wrote
    for p in ("0-0", "0-1"):
        raw, _ = zk_client.get(f"/consumers/{GROUP}/offsets/t/{p}")
        assert raw.isdigit() and int(raw) == 3 * 14  # Scala's offsetString.toLong
    scala.register()
    scala.rebalance_until()
    assert set(scala.owned) == {("t", "0-0"), ("t", "0-1")}
