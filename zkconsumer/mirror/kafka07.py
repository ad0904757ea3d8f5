"""The ``kafka07://`` target: mirror between two 0.7 clusters (the old MirrorMaker job).

Writes with zkconsumer's own `Producer` in **confirmed** sync mode (every produce is followed
by an offsets request on the same connection; a broker that rejected the set has closed the
socket, so a rejection is seen instead of being silent as in 0.7).  A sender thread gives
the mirror the asynchronous `Target.send` it expects: sends are queued, taken in batches,
collated per (topic, route) into one `Producer.send` each -- one message set, compressed per
the ``target.compression.codec`` -- and every message's ``on_done`` is called with the result.

Routing onto the 0.7 producer's partition list (numeric (broker, partition) order, the list
`Producer.partitions_for` returns, bootstrap ``(b, 0)`` entries included):

* explicit partition index ``i`` (``preserve``, ``round-robin``, unkeyed ``hash``) is sent with
  the one-character key ``chr(i)``: the producer's hash partitioner computes
  ``abs(String.hashCode) % n`` and the Java hash of a one-character string is its code
  point, so it lands exactly on index ``i`` -- no private producer API needed;
* a ``--key-regex`` key is passed as a string (UTF-8 decoded) so it routes like a Scala
  producer's ``String`` key would.

The producer's own retries are turned off (``num.retries=0``): its retries move a chunk to
*another* partition, which would break ``preserve``; the mirror retries on the same route.
Invariant: every queued message gets exactly one ``on_done`` (success, failure, or -- at
`close` -- a `TargetError` for what was never sent).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from zkconsumer.errors import ConfigurationError, MessageTooLargeError, TargetError
from zkconsumer.mirror.targets import DoneCallback
from zkconsumer.protocol import default_partition

__all__ = ["Kafka07Target"]

log = logging.getLogger(__name__)

_Item = tuple[str, bytes, "str | None", DoneCallback]  # topic, value, routing key, callback


class Kafka07Target:
    """A 0.7 cluster reached through its ZooKeeper (see module docstring)."""

    def __init__(self, zk_connect: str, options: Mapping[str, str] | None = None, *,
                 batch_size: int = 1000) -> None:
        from zkconsumer.producer.config import ProducerConfig

        self.zk_connect = zk_connect
        self.description = f"kafka07://{zk_connect}"
        props = dict(options or {})
        for forbidden in ("zk.connect", "broker.list", "producer.type", "partitioner.class"):
            if forbidden in props:
                raise ConfigurationError(f"target.{forbidden} is set by the mirror")
        try:
            self._config = ProducerConfig.from_properties(
                props, zk_connect=zk_connect, producer_type="sync", confirm=True,
                num_retries=0, partitioner="hash")
        except ConfigurationError as exc:
            raise ConfigurationError(f"target (0.7 producer) settings: {exc}") from exc
        self._batch_size = batch_size
        self._producer: Any = None
        self._producer_lock = threading.Lock()
        self._cond = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._busy = 0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="mirror-kafka07-sender",
                                        daemon=True)
        self._thread.start()

    # -- lifecycle ----------------------------------------------------------------------------

    def _get_producer(self) -> Any:
        from zkconsumer.producer.producer import Producer

        with self._producer_lock:
            if self._producer is None:
                self._producer = Producer(self._config)
            return self._producer

    def open(self) -> None:
        self._get_producer()

    def reset(self) -> None:
        with self._producer_lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=0)
            except Exception as exc:  # a broken producer must not block the retry
                log.debug("closing 0.7 producer: %r", exc)

    def close(self, timeout: float = 5.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
            leftover = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for _topic, _value, _key, on_done in leftover:
            on_done(TargetError("target closed before the message was sent"))
        self._thread.join(timeout)
        self.reset()

    # -- topics -------------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        n = len(self._get_producer().partitions_for(topic))
        if n == 0:
            raise TargetError(f"no live broker in {self.description} for topic {topic!r}")
        return n

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        raise TargetError("0.7 clusters have no create-topic request; brokers create a topic "
                          "on first produce with their num.partitions / topic.partition.count.map")

    def hash_partition(self, data: bytes, n: int) -> int:
        return default_partition(data, n)

    # -- data ---------------------------------------------------------------------------------

    def send(self, topic: str, value: bytes, partition: int | None, key: bytes | None,
             on_done: DoneCallback) -> None:
        if partition is not None:
            routing: str | None = chr(partition)
        elif key is not None:
            try:
                routing = key.decode("utf-8")
            except UnicodeDecodeError:
                routing = key.decode("latin-1")
        else:
            routing = None
        with self._cond:
            if self._closed:
                raise TargetError("target is closed")
            self._queue.append((topic, value, routing, on_done))
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    # -- sender thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                if self._closed and not self._queue:
                    return
                n = min(len(self._queue), self._batch_size)
                batch = [self._queue.popleft() for _ in range(n)]
                self._busy += 1
            try:
                self._send_batch(batch)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _send_batch(self, batch: list[_Item]) -> None:
        groups: dict[tuple[str, str | None], list[_Item]] = {}
        for item in batch:
            groups.setdefault((item[0], item[2]), []).append(item)
        for (topic, routing), items in groups.items():
            error: BaseException | None = None
            try:
                self._get_producer().send(topic, [i[1] for i in items], key=routing)
            except MessageTooLargeError as exc:
                error = TargetError(f"0.7 target refuses a message for {topic}: {exc}")
                error.__cause__ = exc
            except Exception as exc:  # DeliveryError, connection, ZooKeeper: all retriable
                error = exc
            for item in items:
                try:
                    item[3](error)
                except Exception:  # a callback bug must not kill the sender
                    log.exception("mirror delivery callback failed")
