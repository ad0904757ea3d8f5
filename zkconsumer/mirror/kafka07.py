"""The ``kafka07://`` target: mirror between two 0.7 clusters (the old MirrorMaker job).

Writes with zkconsumer's own `Producer` in **confirmed** sync mode (every produce is followed
by an offsets request on the same connection; a broker that rejected the set has closed the
socket, so a rejection is seen instead of being silent as in 0.7).  A sender thread gives
the mirror the asynchronous `Target.send` / `Target.send_run` it expects: runs are queued,
taken in batches, their messages collated per (topic, route) into one `Producer.send` each --
one message set, compressed per the ``target.compression.codec`` -- and each run's
``on_done`` is called once with the result.

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
Invariant: every queued run gets exactly one ``on_done`` (success, failure, or -- at
`close` -- a `TargetError` for what was never sent).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from zkconsumer.errors import ConfigurationError, MessageTooLargeError, TargetError
from zkconsumer.mirror.targets import DoneCallback, RunItem
from zkconsumer.protocol import default_partition

if TYPE_CHECKING:
    from zkconsumer.producer.config import ProducerConfig

__all__ = ["Kafka07Target", "producer07_config"]

log = logging.getLogger(__name__)

#: topic, [(value, routing key)], callback: one run, reported once
_Item = tuple[str, list[tuple[bytes, "str | None"]], DoneCallback]


def producer07_config(zk_connect: str, options: Mapping[str, str],
                      **overrides: Any) -> ProducerConfig:
    """The 0.7 producer settings of a mirror target: ``target.*`` properties, then what the
    mirror owns (ZooKeeper mode, sync and confirmed, no producer-side retries -- they would
    move a chunk to another partition; the mirror retries on the same route)."""
    from zkconsumer.producer.config import ProducerConfig

    props = dict(options)
    for forbidden in ("zk.connect", "broker.list", "producer.type", "partitioner.class"):
        if forbidden in props:
            raise ConfigurationError(f"target.{forbidden} is set by the mirror")
    try:
        return ProducerConfig.from_properties(props, zk_connect=zk_connect,
                                              producer_type="sync", confirm=True,
                                              num_retries=0, **overrides)
    except ConfigurationError as exc:
        raise ConfigurationError(f"target (0.7 producer) settings: {exc}") from exc


class Kafka07Target:
    """A 0.7 cluster reached through its ZooKeeper (see module docstring)."""

    def __init__(self, zk_connect: str, options: Mapping[str, str] | None = None, *,
                 batch_size: int = 1000) -> None:
        self.zk_connect = zk_connect
        self.description = f"kafka07://{zk_connect}"
        self._config = producer07_config(zk_connect, options or {}, partitioner="hash")
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
        for _topic, _values, on_done in leftover:
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
             on_done: DoneCallback, *, stream: Hashable = None) -> None:
        self.send_run(topic, [(value, partition, key)], on_done)

    def send_run(self, topic: str, items: Sequence[RunItem], on_done: DoneCallback, *,
                 stream: Hashable = None) -> None:
        # ``stream`` needs nothing here: one sender thread keeps every run in queue order.
        values = [(value, _routing(partition, key)) for value, partition, key in items]
        with self._cond:
            if self._closed:
                raise TargetError("target is closed")
            self._queue.append((topic, values, on_done))
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
                batch = [self._queue.popleft()]
                taken = len(batch[0][1])
                while self._queue and taken < self._batch_size:
                    batch.append(self._queue.popleft())
                    taken += len(batch[-1][1])
                self._busy += 1
            try:
                self._send_batch(batch)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _send_batch(self, batch: list[_Item]) -> None:
        # every route of the batch once (one message set each), then each run's verdict
        groups: dict[tuple[str, str | None], list[bytes]] = {}
        for topic, values, _done in batch:
            for value, routing in values:
                groups.setdefault((topic, routing), []).append(value)
        failed: dict[tuple[str, str | None], BaseException] = {}
        for (topic, routing), payloads in groups.items():
            try:
                self._get_producer().send(topic, payloads, key=routing)
            except MessageTooLargeError as exc:
                error = TargetError(f"0.7 target refuses a message for {topic}: {exc}")
                error.__cause__ = exc
                failed[(topic, routing)] = error
            except Exception as exc:  # DeliveryError, connection, ZooKeeper: all retriable
                failed[(topic, routing)] = exc
        for topic, values, on_done in batch:
            verdict = next((failed[(topic, r)] for _v, r in values if (topic, r) in failed),
                           None)
            try:
                on_done(verdict)
            except Exception:  # a callback bug must not kill the sender
                log.exception("mirror delivery callback failed")


def _routing(partition: int | None, key: bytes | None) -> str | None:
    """The 0.7 producer's key that routes to ``partition`` (module docstring), or ``key``
    as the String a Scala producer would have used."""
    if partition is not None:
        return chr(partition)
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return key.decode("latin-1")
