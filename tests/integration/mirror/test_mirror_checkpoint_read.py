"""A claim's checkpoint read (mirror/checkpoints.py ``read_checkpoints``) against tansu: a
checkpoint committed *behind* another lane's open transaction in the one checkpoint
partition is not missed -- the read waits for that transaction instead of stopping at the
last stable offset (which handed a claim an older checkpoint, or none, and made it write
again what was mirrored since: duplicates under kill -9)."""

from __future__ import annotations

import threading

from confluent_kafka import Producer
from fixtures.tansu import create_topic

from zkconsumer.mirror.checkpoints import Checkpoint, read_checkpoints
from zkconsumer.mirror.targets import producer_config


def _producer(bootstrap: str, tid: str) -> Producer:
    producer = Producer(producer_config([bootstrap], {}, client_id=tid, transactional_id=tid))
    producer.init_transactions(30)
    producer.begin_transaction()
    return producer


def test_a_checkpoint_behind_another_lanes_open_transaction_is_read(tansu) -> None:
    topic = "checkpoints-behind"
    create_topic(tansu.bootstrap, topic, 1)
    older, newer = Checkpoint(100, 0, "t", {0: 10}), Checkpoint(900, 0, "t", {0: 90})
    x = _producer(tansu.bootstrap, "lane-x")
    x.produce(topic, older.encode(), b"x")
    x.commit_transaction(30)
    y = _producer(tansu.bootstrap, "lane-y")  # another lane: open, its record in the partition
    y.produce(topic, Checkpoint(5).encode(), b"y")
    y.flush(30)
    x.begin_transaction()
    x.produce(topic, newer.encode(), b"x")  # committed after y's record: behind y's open txn
    x.commit_transaction(30)

    result: dict[bytes, Checkpoint] = {}
    reader = threading.Thread(target=lambda: result.update(
        read_checkpoints(tansu.bootstrap, topic, [b"x"], timeout=30)))
    reader.start()
    reader.join(1.0)
    assert reader.is_alive(), f"read past an open transaction without waiting: {result}"
    y.commit_transaction(30)
    reader.join(30)
    assert not reader.is_alive()
    assert result == {b"x": newer}
