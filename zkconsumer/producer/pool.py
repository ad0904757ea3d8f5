"""One `BrokerConnection` per broker for the producer, recycled like 0.7's SyncProducer.

Job: hand out the connection of a broker id, replacing it when the broker re-registered at a
different address, and close it after ``reconnect.interval`` requests or
``reconnect.time.interval.ms`` (0.7 did this so that a load balancer or a restarted broker
gets traffic back; the next request reconnects lazily).

Connections are made with no reconnect backoff of their own: the producer's retry policy
(``num.retries`` spaced by ``retry.backoff.ms``) decides when a broker is tried again, so every
retry really attempts a connection instead of failing fast inside a backoff window.

Thread-safety: the dict is guarded by a lock; each connection serialises its own users.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from zkconsumer.client.connection import BrokerConnection
from zkconsumer.errors import BrokerConnectionError
from zkconsumer.producer.config import ProducerConfig

__all__ = ["ConnectionPool"]

log = logging.getLogger(__name__)


class ConnectionPool:
    def __init__(self, config: ProducerConfig, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = config
        self._clock = clock
        self._lock = threading.Lock()
        self._conns: dict[int, BrokerConnection] = {}
        self._closed = False

    def get(self, broker_id: int, host: str, port: int) -> BrokerConnection:
        """The connection to ``broker_id`` at ``host:port`` (created lazily, not connected).

        `BrokerConnectionError` once the pool is closed: a sender thread that outlived
        ``Producer.close(timeout)`` must not open new sockets nobody will close.
        """
        with self._lock:
            if self._closed:
                raise BrokerConnectionError("producer is closed", host=host, port=port)
            conn = self._conns.get(broker_id)
            if conn is not None and (conn.host, conn.port) == (host, port):
                return conn
            if conn is not None:
                log.info("broker %s moved from %s:%s to %s:%s", broker_id, conn.host,
                         conn.port, host, port)
                conn.close()
            cfg = self._config
            conn = BrokerConnection(host, port, connect_timeout=cfg.connect_timeout_ms / 1000.0,
                                    socket_timeout=cfg.socket_timeout_ms / 1000.0,
                                    send_buffer=cfg.buffer_size, clock=self._clock,
                                    reconnect_backoff=0.0)
            self._conns[broker_id] = conn
            return conn

    def after_request(self, conn: BrokerConnection) -> None:
        """Recycle ``conn`` when it has served its request or time budget."""
        cfg = self._config
        if conn.requests_sent >= cfg.reconnect_interval or (
                cfg.reconnect_time_interval_ms >= 0 and conn.connected_at is not None
                and self._clock() - conn.connected_at >= cfg.reconnect_time_interval_ms / 1000):
            log.debug("recycling connection to %s:%s after %d requests", conn.host, conn.port,
                      conn.requests_sent)
            conn.close()

    def close_all(self) -> None:
        """Close every connection and refuse new ones.

        Uses `BrokerConnection.abort`, so a request still in flight on another thread fails at
        once instead of holding the caller until its socket timeout.
        """
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.abort()
