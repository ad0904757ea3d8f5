"""The monitor on groups whose znodes the test writes itself, Scala 0.7 style: evaluation,
bad input (a garbage offset znode, an unreachable broker), ``--once`` exit statuses."""

from __future__ import annotations

import json

import pytest
from fixtures.waiting import wait_until
from monitor_helpers import (
    monitor_once,
    produce_to,
    running_monitor,
    scala_commit,
    scala_member,
    scala_owner,
)

pytestmark = pytest.mark.slow


def test_scala_group_ok_then_stop_and_once_exit_statuses(zk_connect, zk_client, dev_broker):
    broker = dev_broker(num_partitions=2)
    end0 = produce_to(broker, "events", 0, 5)
    end1 = produce_to(broker, "events", 1, 3)
    scala_member(zk_client, "scala", "scala_host-1-abc", {"events": 1})
    scala_owner(zk_client, "scala", "events", "0-0", "scala_host-1-abc-0")
    scala_owner(zk_client, "scala", "events", "0-1", "scala_host-1-abc-0")
    scala_commit(zk_client, "scala", "events", "0-0", end0)
    scala_commit(zk_client, "scala", "events", "0-1", end1)

    done = monitor_once(zk_connect)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scala" in done.stdout and "OK" in done.stdout
    with running_monitor(zk_connect) as mon:
        g = mon.wait_status("scala", "OK")
        assert [p["status"] for p in g["partitions"]] == ["OK", "OK"]
        assert [p["owner"] for p in g["partitions"]] == ["scala_host-1-abc-0"] * 2
        assert g["total_lag"] == 0 and len(g["members"]) == 1
        listed = mon.api("/v1/groups")
        assert [x["group"] for x in listed] == ["scala"]
        one = mon.api("/v1/groups/scala")
        assert one["status"] == "OK" and "0-1" in {p["partition"] for p in one["partitions"]}
        assert "events/0-0" in one["partition_history"]

        # the member goes away (its session ends: ephemerals gone) with lag behind it
        produce_to(broker, "events", 0, 4)
        zk_client.delete("/consumers/scala/ids/scala_host-1-abc")
        zk_client.delete("/consumers/scala/owners/events", recursive=True)
        g = mon.wait_status("scala", "STOP")
        assert {p["partition"]: p["status"] for p in g["partitions"]} == {"0-0": "STOP",
                                                                          "0-1": "OK"}
    done = monitor_once(zk_connect, "--json", "--window", "2", "--interval", "0.5")
    assert done.returncode == 2, done.stdout + done.stderr
    (g,) = json.loads(done.stdout)
    assert g["group"] == "scala" and g["status"] == "STOP" and g["members"] == []


def test_garbage_offset_and_unreachable_broker_are_partition_errors(
        zk_connect, zk_client, dev_broker):
    a = dev_broker(num_partitions=1)
    b = dev_broker(num_partitions=1)
    end_a = produce_to(a, "events", 0, 2)
    produce_to(b, "events", 0, 2)
    scala_member(zk_client, "g", "c1", {"events": 1})
    scala_owner(zk_client, "g", "events", "0-0", "c1-0")
    scala_owner(zk_client, "g", "events", "1-0", "c1-0")
    scala_commit(zk_client, "g", "events", "0-0", end_a)
    zk_client.create("/consumers/g/offsets/events/1-0", b"not-a-number")
    with running_monitor(zk_connect) as mon:
        g = mon.wait_status("g", "ERR")
        by = {p["partition"]: p for p in g["partitions"]}
        assert by["0-0"]["status"] == "OK"
        assert by["1-0"]["status"] == "ERR" and "unreadable" in by["1-0"]["error"]
        zk_client.set("/consumers/g/offsets/events/1-0", b"0")
        mon.wait_status("g", "OK")  # fixed: the monitor kept polling
        # broker 1 stops answering but stays registered (its registration is ours now)
        reg = zk_client.get("/brokers/ids/1")[0]
        b.stop()
        zk_client.create("/brokers/ids/1", reg, ephemeral=True)
        g = mon.wait_status("g", "ERR")
        by = {p["partition"]: p for p in g["partitions"]}
        assert by["0-0"]["status"] == "OK", by
        assert by["1-0"]["status"] == "ERR" and "log end unknown" in by["1-0"]["error"]
        polls = mon.monitor.state.polls
        mon.wait_status("g", "ERR")
        wait_until(lambda: mon.monitor.state.polls > polls + 2, what="polls go on")


def test_owner_values_are_read_again_only_when_their_directory_changed(
        zk_connect, zk_client, zk_session, dev_broker):
    from zkconsumer.monitor.sampler import Sampler

    produce_to(dev_broker(num_partitions=2), "events", 0, 1)
    scala_member(zk_client, "g", "c1", {"events": 1})
    scala_member(zk_client, "g", "c2", {"events": 1})
    for p in ("0-0", "0-1"):
        scala_owner(zk_client, "g", "events", p, "c1-0")
        scala_commit(zk_client, "g", "events", p, 0)
    sampler = Sampler(zk_session)
    try:
        first = sampler.poll()
        second = sampler.poll()
        assert second.zk_reads == first.zk_reads - 2  # the two owner znodes, cached
        owners = {p.partition: p.owner for p in second.groups["g"].partitions}
        assert owners == {"0-0": "c1-0", "0-1": "c1-0"}
        # a rebalance: delete and re-create with another thread (cversion moves)
        zk_client.delete("/consumers/g/owners/events/0-1")
        scala_owner(zk_client, "g", "events", "0-1", "c2-0")
        third = sampler.poll()
        assert third.zk_reads == first.zk_reads
        owners = {p.partition: p.owner for p in third.groups["g"].partitions}
        assert owners == {"0-0": "c1-0", "0-1": "c2-0"}
        # the whole directory re-created with the same number of changes: czxid differs
        zk_client.delete("/consumers/g/owners/events", recursive=True)
        scala_owner(zk_client, "g", "events", "0-0", "c2-0")
        scala_owner(zk_client, "g", "events", "0-1", "c2-0")
        owners = {p.partition: p.owner for p in sampler.poll().groups["g"].partitions}
        assert owners == {"0-0": "c2-0", "0-1": "c2-0"}
    finally:
        sampler.close()
