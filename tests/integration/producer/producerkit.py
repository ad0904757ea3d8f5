"""Helpers shared by the producer integration tests (reading back what brokers stored)."""

from __future__ import annotations

from typing import Any

from zkconsumer.client import SimpleConsumer


def read_values(broker: Any, topic: str, partition: int) -> list[bytes]:
    """Every message value of one partition of ``broker``, from the start."""
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10.0) as consumer:
        return [m.value for m in consumer.iter_messages(topic, partition, 0)]


def read_layout(brokers: list[Any], topic: str, partitions: int) -> dict[tuple[int, int],
                                                                        list[bytes]]:
    """``{(broker id, partition): values}`` for every non-empty partition."""
    layout: dict[tuple[int, int], list[bytes]] = {}
    for b in brokers:
        for p in range(partitions):
            values = read_values(b, topic, p)
            if values:
                layout[(b.broker_id, p)] = values
    return layout
