"""DeadLetterTopic publishes a failed batch's values to a real broker, unchanged."""

from __future__ import annotations

from typing import Any

from fixtures.waiting import wait_until

from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.consumer.message import Message
from zkconsumer.daemon.sinks.deadletter import DeadLetterTopic


def test_dead_letter_topic_round_trip(dev_broker: Any, zk_connect: str) -> None:
    broker = dev_broker(num_partitions=1)
    batch = [Message("src", 0, 0, 10 * i, 10 * i + 10, f"bad-{i}".encode()) for i in range(3)]
    dl = DeadLetterTopic("src-dead", zk_connect)
    try:
        dl.write(batch, ValueError("boom"), 3)
    finally:
        dl.close()
    consumer = SimpleConsumer(broker.host, broker.port)
    try:
        got = wait_until(lambda: [m.value for m in consumer.iter_messages("src-dead", 0, 0)]
                         or None, what="dead letters on the broker")
    finally:
        consumer.close()
    assert got == [b"bad-0", b"bad-1", b"bad-2"]
