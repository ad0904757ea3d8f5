"""`GroupConsumer.poll_columns`: the batch path hands out exactly what `poll_batch` does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fixtures.waiting import wait_until
from groupkit import GROUP, offsets, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import Columns, GroupConsumer, Subscription
from zkconsumer.protocol import Compression


def _load(dev_broker: Any, zk_client: KazooClient) -> tuple[Any, dict[str, list[bytes]]]:
    b = dev_broker(num_partitions=3)
    sent: dict[str, list[bytes]] = {}
    for p, codec in enumerate((Compression.NONE, Compression.GZIP, Compression.SNAPPY)):
        for batch in range(3):
            values = [f"{p}-{batch}-{i}".encode() * (i % 5 + 1) for i in range(40)]
            produce_to(b, "t", p, values, compression=codec)
            sent.setdefault(f"0-{p}", []).extend(values)
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    return b, sent


def test_columns_carry_every_message_with_its_offsets(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    _, sent = _load(dev_broker, zk_client)
    columns_member = make_consumer(Subscription(topics={"t": 1}), consumer_id="c",
                                   group="cols", auto_ack=False, autocommit_enable=False)
    tuples_member = make_consumer(Subscription(topics={"t": 1}), consumer_id="m",
                                  group="msgs", auto_ack=False, autocommit_enable=False)
    total = sum(len(v) for v in sent.values())
    got: dict[str, list[bytes]] = {}
    rows: list[tuple[str, int, int, bytes]] = []
    while sum(len(v) for v in got.values()) < total:
        cols = columns_member.poll_columns(1000, timeout=5.0)
        assert isinstance(cols, Columns) and cols
        for run in cols:
            assert run.topic == "t" and len(run) > 0
            values = list(run.values())
            got.setdefault(run.partition, []).extend(values)
            view, ends = run.payload_view(), run.payload_ends()
            assert [bytes(view[s:e]) for s, e in zip([0, *ends[:-1]], ends, strict=True)] \
                == values
            assert run.payload_bytes == sum(map(len, values))
            assert run.next_offset == run.next_offsets[-1]
            rows += [(run.partition, o, n, v) for o, n, v in
                     zip(run.offsets, run.next_offsets, values, strict=True)]
            columns_member.ack_run(run)
    assert got == sent
    # the same messages, offsets and next offsets (wrapper semantics) as the per-message API
    expected = []
    while len(expected) < total:
        expected += [(m.partition, m.offset, m.next_offset, m.value)
                     for m in tuples_member.poll_batch(1000, timeout=5.0)]
    assert sorted(rows) == sorted(expected)
    columns_member.commit()
    ends = {p: max(n for q, _, n, _ in rows if q == p) for p in sent}
    assert offsets(zk_client, "cols", "t") == ends


def test_last_per_partition_acks_a_whole_poll(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    _, sent = _load(dev_broker, zk_client)
    member = make_consumer(Subscription(topics={"t": 1}), consumer_id="c", auto_ack=False,
                           autocommit_enable=False)
    total = sum(len(v) for v in sent.values())
    seen = 0
    last_next: dict[str, int] = {}
    while seen < total:
        cols = member.poll_columns(100_000, timeout=5.0)
        seen += len(cols)
        for m in cols.last_per_partition():
            member.ack(m)
            last_next[m.partition] = m.next_offset
        assert sum(1 for _ in cols.messages()) == len(cols)
    member.commit()
    assert offsets(zk_client, GROUP, "t") == last_next


def test_seek_from_on_assigned_starts_the_claim_there(
        dev_broker: Any, zk_client: KazooClient,
        make_consumer: Callable[..., GroupConsumer]) -> None:
    # a position kept outside ZooKeeper (the exactly-once mirror's checkpoint) wins: seek in
    # on_assigned, before the fetchers start
    b = dev_broker(num_partitions=1)
    produce_to(b, "t", 0, [b"a", b"b", b"c"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    member = make_consumer(Subscription(topics={"t": 1}), start=False)

    class Seeker:
        claims: list[int] = []

        def on_assigned(self, partitions: dict[str, list[str]]) -> None:
            state = member.claimed()[("t", "0-0")]
            self.claims.append(state.claim)
            member.seek("t", "0-0", 2 * (4 + 6 + 1))  # past a and b (1-byte payloads)

    seeker = Seeker()
    member.add_listener(seeker)
    member.start()
    (m,) = member.poll_batch(10, timeout=5.0)
    assert m.value == b"c" and m.claim == seeker.claims[0]
