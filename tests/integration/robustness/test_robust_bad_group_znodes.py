"""One bad znode must not block a whole consumer group (issue 11).

Garbage in ``/brokers/ids/N``, a ``/brokers/topics/T/N`` of a broker that is not registered,
and garbage committed offsets (``abc``, ``-5``, ``1.5``, > 2**63-1): the group consumes every
partition it can, parks or leaves out only the bad ones (one loud line each, not one per
rebalance), and ``group describe`` / ``offsets export`` say what is wrong.  Real ZooKeeper,
real dev broker; the garbage is written with the test's kazoo client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.cli import main
from zkconsumer.client import BrokerConnection, produce
from zkconsumer.consumer import ConsumerConfig, GroupConsumer, Subscription
from zkconsumer.consumer.groupinfo import describe_group
from zkconsumer.errors import ZkConsumerError, ZnodeDataError
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

GROUP = "g"


@pytest.fixture
def make_consumer(zk_connect: str) -> Iterator[Callable[..., GroupConsumer]]:
    made: list[GroupConsumer] = []

    def make(topic: str, **overrides: Any) -> GroupConsumer:
        values: dict[str, Any] = dict(
            group_id=GROUP, zk_connect=zk_connect, rebalance_backoff_ms=100,
            rebalance_retries_max=3, fetcher_backoff_ms=20, autocommit_interval_ms=200,
            socket_timeout_ms=5000, fetch_size=64 * 1024)
        values.update(overrides)
        consumer = GroupConsumer(ConsumerConfig(**values), Subscription(topics={topic: 1}))
        made.append(consumer)
        consumer.start()
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def _topic(dev_broker: Any, zk_session: ZkSession, topic: str, partitions: int) -> Any:
    b = dev_broker(topic_partitions={topic: partitions})
    with BrokerConnection(b.host, b.port) as conn:
        for p in range(partitions):
            produce(conn, topic, p, encode_message_set([f"{p}-a".encode(), f"{p}-b".encode()]),
                    confirm=True)
    wait_until(lambda: read_topic_partitions(zk_session, topic) == {b.broker_id: partitions},
               what="topic registered")
    return b


def _poll(consumer: GroupConsumer, messages: int, errors: int,
          timeout: float = 15.0) -> tuple[list[bytes], list[ZkConsumerError]]:
    got: list[bytes] = []
    failed: list[ZkConsumerError] = []

    def step() -> bool:
        try:
            got.extend(m.value for m in consumer.poll_batch(100, timeout=0.2))
        except ZkConsumerError as exc:  # a parked partition: raised once, the rest goes on
            failed.append(exc)
        return len(got) >= messages and len(failed) >= errors

    wait_until(step, timeout=timeout, what=f"{messages} messages and {errors} errors")
    return got, failed


def test_garbage_broker_znodes_leave_only_their_partitions_out(
        dev_broker: Any, zk_session: ZkSession, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    _topic(dev_broker, zk_session, "t", 2)
    zk_client.create("/brokers/ids/7", b"garbage", ephemeral=True)       # unreadable
    zk_client.create("/brokers/topics/t/7", b"2", ephemeral=True)        # 7-0, 7-1
    zk_client.create("/brokers/topics/t/9", b"1", ephemeral=True)        # 9: not registered
    # before: start() failed with "broker(s) [7, 9] ... are not registered" (or the
    # ZnodeDataError of /brokers/ids/7) on every attempt, and nothing was consumed
    consumer = make_consumer("t")
    assert consumer.owned_partitions() == {"t": ["0-0", "0-1"]}
    # the self-check (health) agrees: unassignable partitions are no drift
    assert consumer.check_assignment() == []
    got, _ = _poll(consumer, 4, 0)
    assert sorted(got) == [b"0-a", b"0-b", b"1-a", b"1-b"]
    for _ in range(3):  # further rebalances do not repeat the warnings
        before = consumer.stats.rebalances
        consumer.request_rebalance()
        wait_until(lambda b=before: consumer.stats.rebalances > b, what="a rebalance")
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert sum("/brokers/ids/7" in e for e in errors) == 1, errors
    assert sum("t/7-0, t/7-1 not claimed" in e for e in errors) == 1, errors
    assert sum("t/9-0 not claimed" in e for e in errors) == 1, errors
    # group describe works and says why those partitions are unowned
    report = describe_group(zk_session, GROUP)
    assert {p.partition for p in report.partitions} == {"0-0", "0-1", "7-0", "7-1", "9-0"}
    for name in ("7-0", "7-1", "9-0"):
        assert any(f"t/{name} is on broker" in p and "not registered" in p
                   for p in report.problems), report.problems


def test_a_garbage_committed_offset_parks_only_its_partition(
        dev_broker: Any, zk_session: ZkSession, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    _topic(dev_broker, zk_session, "o", 5)
    bad = {"0-0": b"abc", "0-1": b"-5", "0-2": b"1.5", "0-3": b"9223372036854775808"}
    for name, value in bad.items():
        zk_client.create(f"/consumers/{GROUP}/offsets/o/{name}", value, makepath=True)
    # before: every claim failed on the first unreadable offset: nothing owned, nothing read
    consumer = make_consumer("o")
    assert consumer.owned_partitions() == {"o": ["0-0", "0-1", "0-2", "0-3", "0-4"]}
    got, failed = _poll(consumer, 2, 4)
    assert sorted(got) == [b"4-a", b"4-b"]
    assert all(isinstance(e, ZnodeDataError) for e in failed)
    assert sorted(str(e).split(" is unreadable")[0].rsplit(" ", 1)[-1] for e in failed) == [
        f"o/{n}" for n in sorted(bad)]
    assert all("offsets reset" in str(e) for e in failed)
    errors = {k: v["error"] for k, v in consumer.stats.partitions.items()}
    assert errors["o/0-4"] is None and all(errors[f"o/{n}"] for n in bad)
    # the bad values are left for the operator (never overwritten by a commit)
    consumer.commit()
    for name, value in bad.items():
        assert zk_client.get(f"/consumers/{GROUP}/offsets/o/{name}")[0] == value
    report = describe_group(zk_session, GROUP)
    assert sum("committed offset is unreadable" in p for p in report.problems) == 4


def test_offsets_export_exits_non_zero_when_it_skipped_a_partition(
        zk_connect: str, zk_client: KazooClient, capsys: pytest.CaptureFixture[str]) -> None:
    zk_client.create(f"/consumers/{GROUP}/offsets/o/0-0", b"42", makepath=True)
    zk_client.create(f"/consumers/{GROUP}/offsets/o/0-1", b"abc", makepath=True)
    status = main(["offsets", "export", "--zk", zk_connect, "--group", GROUP])
    out, err = capsys.readouterr()
    # before: exit 0, the unreadable partition silently missing from the export
    assert status == 1
    assert out == f"/consumers/{GROUP}/offsets/o/0-0:42\n"
    assert f"/consumers/{GROUP}/offsets/o/0-1" in err and "1 partition" in err
