"""The bridge's connections to the 0.7 brokers: one for produces, one for reads, per broker.

`zkconsumer.mirror.bridge_target.Kafka07Sink` writes batches with confirmed produces and reads
them back (and the broker's flushed end) to learn where they landed.  Both go over
connections it keeps here, found through the 0.7 producer's cluster view (`ZkClusterView`:
the brokers' registrations in ZooKeeper).

Invariant: a connection that failed is dropped -- with its sibling, as a failure usually
means the broker went away -- and the next use reconnects; nothing here retries (the caller's
`Runtime.retrying` does, with the shared backoff).
"""

from __future__ import annotations

from zkconsumer.client import BrokerConnection, SimpleConsumer
from zkconsumer.errors import MirrorError
from zkconsumer.producer.cluster import ZkClusterView
from zkconsumer.producer.config import ProducerConfig

__all__ = ["BrokerLinks"]


class BrokerLinks:
    """Per 0.7 broker: a produce connection and a reader, opened on first use."""

    def __init__(self, config: ProducerConfig, view: ZkClusterView) -> None:
        self.config = config
        self.view = view
        self._conns: dict[int, BrokerConnection] = {}
        self._readers: dict[int, SimpleConsumer] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        for reader in self._readers.values():
            reader.close()
        self._conns.clear()
        self._readers.clear()

    def _address(self, broker_id: int) -> tuple[str, int]:
        address = self.view.broker(broker_id)
        if address is None:
            raise MirrorError(f"0.7 broker {broker_id} is not registered")
        return address

    def conn(self, broker_id: int) -> BrokerConnection:
        """The produce connection to ``broker_id``."""
        conn = self._conns.get(broker_id)
        if conn is None:
            host, port = self._address(broker_id)
            conn = self._conns[broker_id] = BrokerConnection(
                host, port, connect_timeout=self.config.connect_timeout_ms / 1000.0,
                socket_timeout=self.config.socket_timeout_ms / 1000.0)
        return conn

    def reader(self, broker_id: int) -> SimpleConsumer:
        """The connection that reads ``broker_id``'s partitions (fetches, offsets)."""
        reader = self._readers.get(broker_id)
        if reader is None:
            host, port = self._address(broker_id)
            reader = self._readers[broker_id] = SimpleConsumer(
                host, port, socket_timeout=self.config.socket_timeout_ms / 1000.0)
        return reader

    def drop(self, broker_id: int) -> None:
        """Close both connections to ``broker_id`` (after a failure on either)."""
        conn = self._conns.pop(broker_id, None)
        if conn is not None:
            conn.close()
        reader = self._readers.pop(broker_id, None)
        if reader is not None:
            reader.close()

    def flushed_end(self, topic: str, broker_id: int, partition: int) -> int:
        """The partition's log end as 0.7 reports it: the end of its *flushed* data."""
        try:
            return self.reader(broker_id).latest_offset(topic, partition)
        except Exception:
            self.drop(broker_id)
            raise
