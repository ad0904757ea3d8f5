"""The group consumer on a corrupt message and on a misaligned committed offset (issue 11).

A corrupt message parks its partition *at* the corrupt message, after the valid messages in
front of it were delivered; a committed offset inside a message is named as misaligned (topic,
partition, offset, the fix) instead of "message larger than max.fetch.size" after growing the
fetch to its maximum.  Other partitions keep being consumed.  Real ZooKeeper and dev broker;
corruption is a flipped byte in the segment file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.consumer import ConsumerConfig, GroupConsumer, Subscription, member_state
from zkconsumer.errors import CorruptMessageError, MisalignedOffsetError, ZkConsumerError
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

GROUP = "g"
ENTRY = 4 + 6 + 4  # length prefix + magic/attributes/crc + a 4-byte payload
N = 300


@pytest.fixture
def consumer_for(zk_connect: str) -> Iterator[Callable[[str], GroupConsumer]]:
    made: list[GroupConsumer] = []

    def make(topic: str) -> GroupConsumer:
        consumer = GroupConsumer(ConsumerConfig(
            group_id=GROUP, zk_connect=zk_connect, rebalance_backoff_ms=100,
            rebalance_retries_max=3, fetcher_backoff_ms=20, autocommit_enable=False,
            socket_timeout_ms=5000, fetch_size=64 * 1024), Subscription(topics={topic: 1}))
        made.append(consumer)
        consumer.start()
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def _topic(dev_broker: Any, zk_session: ZkSession) -> Any:
    b = dev_broker(topic_partitions={"t": 2})
    with BrokerConnection(b.host, b.port) as conn:
        for p in range(2):
            produce(conn, "t", p, encode_message_set([b"%d%03d" % (p, i) for i in range(N)]),
                    confirm=True)
    wait_until(lambda: read_topic_partitions(zk_session, "t") == {b.broker_id: 2},
               what="topic registered")
    return b


def _poll(consumer: GroupConsumer, messages: int,
          errors: int) -> tuple[list[Any], list[ZkConsumerError]]:
    got: list[Any] = []
    failed: list[ZkConsumerError] = []

    def step() -> bool:
        try:
            got.extend(consumer.poll_batch(1000, timeout=0.2))
        except ZkConsumerError as exc:
            failed.append(exc)
        return len(got) >= messages and len(failed) >= errors

    wait_until(step, timeout=15, what=f"{messages} messages and {errors} errors")
    return got, failed


def test_corrupt_message_delivers_the_valid_prefix_and_parks_at_it(
        dev_broker: Any, zk_session: ZkSession,
        consumer_for: Callable[[str], GroupConsumer]) -> None:
    b = _topic(dev_broker, zk_session)
    bad = 250 * ENTRY
    (segment,) = (Path(b.log_dir) / "t-0").glob("*.kafka")
    with segment.open("r+b") as f:
        f.seek(bad + ENTRY - 1)
        last = f.read(1)
        f.seek(bad + ENTRY - 1)
        f.write(bytes([last[0] ^ 0xFF]))
    consumer = consumer_for("t")
    got, failed = _poll(consumer, 250 + N, 1)
    # before: the error came at the start of the fetch and the 250 valid messages in front
    # of the corrupt one (all in the same 64 KiB fetch) were never delivered
    assert [m.value for m in got if m.partition == "0-0"] == [b"0%03d" % i
                                                              for i in range(250)]
    assert len([m for m in got if m.partition == "0-1"]) == N
    (error,) = failed
    assert isinstance(error, CorruptMessageError) and error.offset == bad
    stats = consumer.stats.partitions["t/0-0"]
    assert stats["consumed"] == bad and stats["error"]


def test_misaligned_committed_offset_is_named(
        dev_broker: Any, zk_session: ZkSession, zk_client: KazooClient,
        consumer_for: Callable[[str], GroupConsumer]) -> None:
    _topic(dev_broker, zk_session)
    zk_client.create(f"/consumers/{GROUP}/offsets/t/0-0", b"17", makepath=True)
    consumer = consumer_for("t")
    got, failed = _poll(consumer, N, 1)
    assert {m.partition for m in got} == {"0-1"}
    (error,) = failed
    # before: "message ... larger than max.fetch.size" after growing the fetch to 64 MiB
    assert isinstance(error, MisalignedOffsetError)
    assert (error.topic, error.partition, error.offset) == ("t", "0-0", 17)
    assert (error.before, error.after) == (ENTRY, 2 * ENTRY)
    text = str(error)
    assert "offset 17 of t/0-0 is misaligned" in text
    assert "zkconsumer offsets reset" in text
    assert f"--group {GROUP} " in text
    assert f"/consumers/{GROUP}/offsets/t/0-0:{2 * ENTRY}" in text


def test_a_parked_partition_is_retried_once_its_offset_is_fixed(
        dev_broker: Any, zk_session: ZkSession, zk_client: KazooClient,
        consumer_for: Callable[[str], GroupConsumer], monkeypatch: pytest.MonkeyPatch) -> None:
    # An operator fixes the offset (offsets reset --force) while the member runs: the
    # partition is claimed afresh after PARKED_RETRY_S, without a restart or a rebalance.
    monkeypatch.setattr(member_state, "PARKED_RETRY_S", 0.5)
    _topic(dev_broker, zk_session)
    zk_client.create(f"/consumers/{GROUP}/offsets/t/0-0", b"17", makepath=True)
    consumer = consumer_for("t")
    _, failed = _poll(consumer, N, 1)
    assert isinstance(failed[0], MisalignedOffsetError)
    zk_client.set(f"/consumers/{GROUP}/offsets/t/0-0", str(2 * ENTRY).encode())
    got, _ = _poll(consumer, N - 2, 0)
    assert [m.value for m in got if m.partition == "0-0"][:N - 2] == [
        b"0%03d" % i for i in range(2, N)]
