"""``zkconsumer group list|describe [--json] [--verify]`` against a live group."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fixtures.waiting import wait_until
from groupkit import GROUP, drain, produce_to
from kazoo.client import KazooClient

from zkconsumer.cli import main
from zkconsumer.consumer import GroupConsumer, Subscription


def test_describe_and_verify(dev_broker: Any, zk_client: KazooClient, zk_connect: str,
                             make_consumer: Callable[..., GroupConsumer],
                             capsys: pytest.CaptureFixture[str]) -> None:
    b = dev_broker(num_partitions=2)
    produce_to(b, "t", 0, [b"a", b"b"])
    produce_to(b, "t", 1, [b"c"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    z = make_consumer(Subscription(topics={"t": 2}), consumer_id="me")
    msgs = drain(z, 3)
    z.commit()
    produce_to(b, "t", 0, [b"d"])  # not consumed yet -> lag on 0-0 after we stop polling

    assert main(["group", "list", "--zk", zk_connect]) == 0
    assert capsys.readouterr().out.split() == [GROUP]

    assert main(["group", "describe", "--zk", zk_connect, "--group", GROUP, "--json",
                 "--verify"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    assert report["members"] == [{"consumer_id": "g1_me", "registration": '{ "t": 2 }',
                                  "threads": {"t": ["g1_me-0", "g1_me-1"]}, "error": None}]
    parts = {p["partition"]: p for p in report["partitions"]}
    ends = {m.partition: m.next_offset for m in msgs}
    assert parts["0-1"]["owner"] == "g1_me-1" and parts["0-0"]["owner"] == "g1_me-0"
    assert parts["0-1"]["offset"] == ends["0-1"] and parts["0-1"]["lag"] == 0
    assert parts["0-0"]["offset"] == ends["0-0"]
    wait_until(lambda: main(["group", "describe", "--zk", zk_connect, "--group", GROUP,
                             "--json"]) == 0 and json.loads(capsys.readouterr().out)[
        "partitions"][0]["lag"] == 6 + 1 + 4, what="lag of the unconsumed message")

    # a partition whose owner is not a live thread fails the check
    z.close()
    zk_client.ensure_path(f"/consumers/{GROUP}/ids")
    zk_client.create(f"/consumers/{GROUP}/ids/g1_other", b'{ "t": 1 }', ephemeral=True)
    zk_client.create(f"/consumers/{GROUP}/owners/t/0-0", b"g1_gone-0", ephemeral=True)
    assert main(["group", "describe", "--zk", zk_connect, "--group", GROUP, "--verify"]) == 1
    out = capsys.readouterr().out
    assert "t/0-0 is owned by g1_gone-0, which is not a live consumer thread of t" in out
    assert "t/0-1 has no owner" in out
    assert "rebalance check: FAILED" in out


def test_describe_after_every_member_left_says_so(
        dev_broker: Any, zk_client: KazooClient, zk_connect: str,
        make_consumer: Callable[..., GroupConsumer], capsys: pytest.CaptureFixture[str]) -> None:
    # With no live member nothing can be owned: the report must not claim that every
    # partition is owned by a live thread (it used to, vacuously).
    b = dev_broker(num_partitions=1)
    produce_to(b, "t", 0, [b"a"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    z = make_consumer(Subscription(topics={"t": 1}), consumer_id="me")
    drain(z, 1)
    z.commit()
    z.close()
    assert main(["group", "describe", "--zk", zk_connect, "--group", GROUP]) == 0
    out = capsys.readouterr().out
    assert "0 member(s)" in out
    assert "rebalance check: no live members" in out
    assert "every partition owned" not in out


def test_verify_reports_an_owner_the_assignment_does_not_name(
        dev_broker: Any, zk_client: KazooClient, zk_connect: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Two live members (Scala-style registrations); each partition owned by a live thread --
    # but 0-1 by the wrong one: what a deaf member that kept its partitions looks like.
    # The sorted range split gives 0-0 to g1_a-0 and 0-1 to g1_b-0.
    b = dev_broker(num_partitions=2)
    produce_to(b, "t", 0, [b"a"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    zk_client.ensure_path(f"/consumers/{GROUP}/ids")
    zk_client.ensure_path(f"/consumers/{GROUP}/owners/t")
    for cid in ("g1_a", "g1_b"):
        zk_client.create(f"/consumers/{GROUP}/ids/{cid}", b'{ "t": 1 }', ephemeral=True)
    zk_client.create(f"/consumers/{GROUP}/owners/t/0-0", b"g1_a-0", ephemeral=True)
    zk_client.create(f"/consumers/{GROUP}/owners/t/0-1", b"g1_a-0", ephemeral=True)
    assert main(["group", "describe", "--zk", zk_connect, "--group", GROUP, "--verify",
                 "--no-log-end"]) == 1
    out = capsys.readouterr().out
    assert "t/0-1 is owned by g1_a-0, but the assignment names g1_b-0" in out
    assert "t/0-0" not in out.split("rebalance check")[-1]
    zk_client.set(f"/consumers/{GROUP}/owners/t/0-1", b"g1_b-0")
    assert main(["group", "describe", "--zk", zk_connect, "--group", GROUP, "--verify",
                 "--no-log-end"]) == 0
