"""Exactly-once into a transactional target (tansu), in threads: resume from the target's
checkpoint, provenance headers, a rebalance mid transaction."""

from __future__ import annotations

from fixtures.tansu import create_topic, read_records
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.mirror.checkpoints import CHECKPOINT_TOPIC, Checkpoint, read_checkpoints
from zkconsumer.protocol import Compression


def test_stop_restart_resumes_from_the_checkpoint_with_provenance(zk_connect, dev_broker, tansu,
                                                                 start_mirror) -> None:
    dev_broker(num_partitions=2)
    create_topic(tansu.bootstrap, "orders", 2)
    first = [f"a-{i}".encode() for i in range(300)]
    produce(zk_connect, "orders", first, chunk=30, codec=Compression.GZIP)
    ends = log_ends(zk_connect, "orders")
    m = start_mirror(tansu.url, topics=["orders"], consumer_id="one")
    wait_until(lambda: committed(zk_connect, "mirror", "orders") == ends, timeout=30,
               what="first run mirrored and committed")
    assert m.mirror.stats.transactions > 0
    m.stop()
    cps = read_checkpoints(tansu.bootstrap, CHECKPOINT_TOPIC,
                           [b'["mirror","orders","0-0"]', b'["mirror","orders","0-1"]'])
    # a partition with nothing to mirror keeps its claim marker (-1: "where ZooKeeper says")
    assert {k: (c.offset, c.skip) for k, c in cps.items()} == {
        f'["mirror","orders","{p}"]'.encode(): (o if o else -1, 0) for p, o in ends.items()}
    second = [f"b-{i}".encode() for i in range(200)]
    produce(zk_connect, "orders", second, chunk=20)
    m2 = start_mirror(tansu.url, topics=["orders"], consumer_id="two")
    ends = log_ends(zk_connect, "orders")
    wait_until(lambda: committed(zk_connect, "mirror", "orders") == ends, timeout=30,
               what="second run mirrored")
    m2.stop()
    got = read_records(tansu.bootstrap, "orders", 500)
    values = [r.value for part in got.values() for r in part]
    assert sorted(values) == sorted(first + second)  # once each
    for part in got.values():
        for r in part:
            src = r.header("zkc.source")
            assert src is not None and src.startswith(b"orders/0-")
            assert r.header("zkc.offset") is not None and r.header("zkc.index") is not None
        # source order per source partition
        seqs: dict[bytes, list[tuple[int, int]]] = {}
        for r in part:
            seqs.setdefault(r.header("zkc.source") or b"", []).append(
                (int(r.header("zkc.offset") or 0), int(r.header("zkc.index") or 0)))
        assert all(s == sorted(s) for s in seqs.values())


def test_checkpoint_codec_round_trips() -> None:
    cp = Checkpoint(123, 4, "t", {0: 5, 3: 9})
    assert Checkpoint.decode(cp.encode()) == cp


def test_rebalance_mid_transaction_neither_loses_nor_duplicates(zk_connect, dev_broker, tansu,
                                                                start_mirror) -> None:
    dev_broker.many(2, num_partitions=2)
    create_topic(tansu.bootstrap, "shared", 4)
    first = [f"one-{i}".encode() for i in range(2000)]
    produce(zk_connect, "shared", first, chunk=20, codec=Compression.SNAPPY)
    # long transactions: b joins while a holds open transactions on every partition
    a = start_mirror(tansu.url, topics=["shared"], consumer_id="a",
                     transaction_interval_ms=60000, transaction_max_messages=10**9)
    wait_until(lambda: a.mirror.stats.sent >= len(first) // 2, timeout=30,
               what="mirror a holding messages in open transactions")
    assert a.mirror.stats.transactions == 0
    b = start_mirror(tansu.url, topics=["shared"], consumer_id="b",
                     transaction_interval_ms=100)

    def split() -> bool:
        owned_a = a.mirror.consumer.owned_partitions().get("shared", [])
        owned_b = b.mirror.consumer.owned_partitions().get("shared", [])
        return len(owned_a) == 2 and len(owned_b) == 2

    wait_until(split, timeout=30, what="the group splitting 4 partitions 2 + 2")
    assert a.mirror.stats.transactions >= 2  # on_revoked committed the open transactions
    second = [f"two-{i}".encode() for i in range(1000)]
    produce(zk_connect, "shared", second, chunk=20, codec=Compression.GZIP)
    a.stop()  # a's remaining partitions move to b (committed on revocation, resumed by b)
    ends = log_ends(zk_connect, "shared")
    wait_until(lambda: committed(zk_connect, "mirror", "shared") == ends, timeout=60,
               what="b catching up")
    b.stop()
    got = read_records(tansu.bootstrap, "shared", len(first) + len(second))
    values = [r.value for part in got.values() for r in part]
    assert len(values) == len(set(values)) == len(first) + len(second)
    assert set(values) == set(first + second)


def test_a_message_the_target_client_refuses_stops_without_acknowledging_it(
        zk_connect, dev_broker, tansu, start_mirror) -> None:
    from zkconsumer.errors import TargetError

    dev_broker()
    create_topic(tansu.bootstrap, "big", 1)
    produce(zk_connect, "big", [b"small"] * 5, chunk=5)
    before = log_ends(zk_connect, "big")
    produce(zk_connect, "big", [b"x" * 5000], chunk=1)
    m = start_mirror(tansu.url, topics=["big"], target_options={"message.max.bytes": "2000"})
    wait_until(lambda: not m.alive, timeout=30, what="the mirror stopping on the refusal")
    assert isinstance(m.error, TargetError) and "5000-byte" in str(m.error)
    m.error = None
    at = committed(zk_connect, "mirror", "big").get("0-0", 0)
    assert at <= before["0-0"]  # never past the big one
    got = read_records(tansu.bootstrap, "big", 0)
    assert all(r.value == b"small" for part in got.values() for r in part)


def test_source_broker_kill_9_and_restart_neither_loses_nor_duplicates(
        zk_connect, zk_client, broker_process, tansu, start_mirror) -> None:
    # A 0.7 source broker dies (kill -9) mid-mirror and comes back on its port and log dir:
    # the group re-fetches from where the transactions got to; nothing twice, nothing lost.
    b = broker_process(num_partitions=2)
    create_topic(tansu.bootstrap, "orders", 2)
    first = [f"a-{i}".encode() for i in range(600)]
    produce(zk_connect, "orders", first, chunk=20, codec=Compression.SNAPPY)
    m = start_mirror(tansu.url, topics=["orders"], consumer_id="one")
    wait_until(lambda: m.mirror.stats.transactions > 0, timeout=30, what="a transaction")
    b.kill()
    # a 0.7 broker refuses to re-register over its predecessor's live session
    wait_until(lambda: not zk_client.exists(f"/brokers/ids/{b.broker_id}"), timeout=30,
               what="the killed broker's session expired")
    broker_process.restart(b)
    second = [f"b-{i}".encode() for i in range(300)]
    produce(zk_connect, "orders", second, chunk=20)
    ends = log_ends(zk_connect, "orders")
    wait_until(lambda: committed(zk_connect, "mirror", "orders") == ends, timeout=60,
               what="everything mirrored after the source broker came back")
    assert m.alive, m.error
    m.stop()
    got = read_records(tansu.bootstrap, "orders", len(first) + len(second))
    values = [r.value for part in got.values() for r in part]
    assert sorted(values) == sorted(first + second)  # every message exactly once
