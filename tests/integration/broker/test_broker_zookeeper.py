"""ZooKeeper registration of the dev broker, checked znode for znode (REFERENCE §1, §4.8)."""

from __future__ import annotations

import re
import time

import pytest
from broker_wire import Wire
from fixtures.waiting import wait_until

from zkconsumer.devcluster.brokers import DevBroker
from zkconsumer.errors import BrokerStartupError
from zkconsumer.protocol import encode_message_set

MSG = encode_message_set([b"0123456789"])


def node(zk_client, path):
    """(data, ephemeralOwner) of a znode, or None if it does not exist."""
    got = zk_client.exists(path)
    if got is None:
        return None
    data, stat = zk_client.get(path)
    return data, stat.ephemeralOwner


def session_of(broker) -> int:
    return broker.broker.registrar.session.session_id


def test_broker_znode_is_creator_host_port_ephemeral_with_null_data_parents(dev_broker,
                                                                            zk_client):
    before = time.time_ns() // 10**6
    b = dev_broker(7)
    data, owner = node(zk_client, "/brokers/ids/7")
    m = re.fullmatch(rb"127\.0\.0\.1-(\d+):127\.0\.0\.1:(\d+)", data)
    assert m, data
    assert before - 1000 <= int(m.group(1)) <= time.time_ns() // 10**6
    assert int(m.group(2)) == b.port
    assert owner == session_of(b) != 0
    for parent in ("/brokers", "/brokers/ids"):
        assert node(zk_client, parent) == (None, 0)  # persistent, *null* data
    acl, _ = zk_client.get_acls("/brokers/ids/7")
    assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(31, "world", "anyone")]


def test_topic_is_registered_on_its_first_log_with_the_broker_local_count(dev_broker,
                                                                          zk_client):
    b = dev_broker(3, num_partitions=4, topic_partitions={"eight": 8})
    assert node(zk_client, "/brokers/topics") is None  # nothing until a log exists
    with Wire(b.host, b.port) as w:
        w.produce("four", 2, MSG)
        w.produce("eight", 7, MSG)
        w.produce("four", 3, MSG)
        assert w.end("four", 3) == 20
    wait_until(lambda: zk_client.exists("/brokers/topics/eight/3"), what="registration")
    wait_until(lambda: zk_client.exists("/brokers/topics/four/3"), what="registration")
    assert node(zk_client, "/brokers/topics/four/3") == (b"4", session_of(b))
    assert node(zk_client, "/brokers/topics/eight/3") == (b"8", session_of(b))
    assert node(zk_client, "/brokers/topics") == (None, 0)
    assert node(zk_client, "/brokers/topics/four") == (None, 0)
    assert sorted(zk_client.get_children("/brokers/topics")) == ["eight", "four"]


def test_fetch_and_offsets_do_not_register_a_topic(dev_broker, zk_client):
    b = dev_broker()
    with Wire(b.host, b.port) as w:
        assert w.fetch("ghost", 0, 0).messages == b""
        assert w.offsets("ghost", 0, -1) == (0,)
        w.produce("real", 0, MSG)
        assert w.end("real", 0) == 20
    assert b.broker.registrar.wait_idle(10)
    assert zk_client.get_children("/brokers/topics") == ["real"]


@pytest.mark.parametrize("data", [b"", encode_message_set([b"x" * 200]), MSG[:-1] + b"\x00"],
                         ids=["empty set", "oversized message", "bad crc"])
def test_sets_that_store_nothing_still_register_the_topic(dev_broker, zk_client, data):
    b = dev_broker(max_message_size=100)
    with Wire(b.host, b.port) as w:
        w.produce("side", 0, data)
    wait_until(lambda: zk_client.exists("/brokers/topics/side/0"), what="registration")
    assert node(zk_client, "/brokers/topics/side/0")[0] == b"1"


def test_a_topic_without_a_log_dir_is_not_registered(dev_broker, zk_client):
    b = dev_broker()
    with Wire(b.host, b.port) as w:
        w.produce("n" * 254, 0, MSG)
        assert w.is_closed()
    with Wire(b.host, b.port) as w:
        w.produce("ok", 0, MSG)
        assert w.end("ok", 0) == 20
    assert b.broker.registrar.wait_idle(10)
    assert zk_client.get_children("/brokers/topics") == ["ok"]


def test_existing_logs_are_registered_at_startup(dev_broker, zk_client):
    b = dev_broker(5, num_partitions=2)
    with Wire(b.host, b.port) as w:
        w.produce("kept", 1, MSG)
        w.produce("dash-ed-topic", 0, MSG)
        assert w.end("kept", 1) == 20
    b.stop()
    assert zk_client.exists("/brokers/ids/5") is None  # a clean stop deregisters at once
    assert zk_client.get_children("/brokers/topics/kept") == []
    b2 = dev_broker.restart(b)
    # registered synchronously during start(): no waiting needed
    assert node(zk_client, "/brokers/topics/kept/5") == (b"2", session_of(b2))
    assert node(zk_client, "/brokers/topics/dash-ed-topic/5") == (b"2", session_of(b2))
    with Wire(b2.host, b2.port) as w:
        assert w.fetch("kept", 1, 0).messages == MSG


def test_duplicate_broker_id_refuses_to_start(dev_broker, zk_client, tmp_path):
    b = dev_broker(1)
    original = node(zk_client, "/brokers/ids/1")
    with pytest.raises(BrokerStartupError, match="already registered"):
        DevBroker(1, tmp_path / "other", zk_connect=dev_broker.zk_connect).start()
    assert node(zk_client, "/brokers/ids/1") == original
    with Wire(b.host, b.port) as w:  # the first broker is unaffected
        assert w.offsets("t", 0, -1) == (0,)


def test_reregisters_broker_and_topics_after_session_expiry(dev_broker, zk_client, zk_expire):
    b = dev_broker(2, num_partitions=3)
    with Wire(b.host, b.port) as w:
        w.produce("a", 0, MSG)
        w.produce("b", 2, MSG)
    wait_until(lambda: zk_client.exists("/brokers/topics/b/2"), what="registration")
    old_session = session_of(b)
    old_value = node(zk_client, "/brokers/ids/2")[0]
    zk_expire(b.broker.registrar.session)

    def reregistered():
        got = node(zk_client, "/brokers/ids/2")
        return got is not None and got[1] != old_session and all(
            (n := node(zk_client, f"/brokers/topics/{t}/2")) is not None and n[1] == got[1]
            for t in ("a", "b"))

    wait_until(reregistered, timeout=20, what="re-registration on the new session")
    data, owner = node(zk_client, "/brokers/ids/2")
    assert owner == session_of(b)
    assert data.endswith(f":127.0.0.1:{b.port}".encode()) and data != old_value
    assert node(zk_client, "/brokers/topics/a/2")[0] == b"3"
    with Wire(b.host, b.port) as w:  # and it kept serving
        assert w.fetch("a", 0, 0).messages == MSG


def test_two_brokers_register_side_by_side(dev_broker, zk_client):
    brokers = dev_broker.many(2, num_partitions=2)
    for b in brokers:
        with Wire(b.host, b.port) as w:
            w.produce("shared", 1, MSG)
    for b in brokers:
        wait_until(lambda b=b: zk_client.exists(f"/brokers/topics/shared/{b.broker_id}"),
                   what="registration")
    assert sorted(zk_client.get_children("/brokers/ids")) == ["0", "1"]
    assert sorted(zk_client.get_children("/brokers/topics/shared")) == ["0", "1"]


def test_standalone_broker_touches_no_zookeeper(dev_broker, zk_client):
    b = dev_broker(zk=False)
    assert b.broker.registrar is None
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, MSG)
        assert w.end("t", 0) == 20
    assert zk_client.get_children("/") == []
