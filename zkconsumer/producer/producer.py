"""`Producer`: the ZooKeeper-aware (or ``broker.list``) Kafka 0.7 producer, sync or async.

``send(topic, messages, key=None)`` hands over one message or a list; all messages of one call
go to one partition (0.7's ``ProducerData``).  Keys only route (0.7 messages carry no key):
``abs(javaHashCode(key)) % n`` over the numerically sorted partition list, so a key lands on
the partition a Scala producer would pick.

Sync mode (``producer.type=sync``): ``send`` delivers before returning (with retries, see
`zkconsumer.producer.sender`) and raises `DeliveryError` (``.messages`` = the payloads not
delivered) if it cannot.

Async mode (``producer.type=async``): ``send`` enqueues (policy ``queue.enqueueTimeout.ms``,
`QueueFullError`), one sender thread batches on ``batch.size`` / ``queue.time`` and sends one
request per broker per batch (a backlog of full batches: one request for up to
`_MAX_BATCHES` of them, each still its own message set).  ``send(topic, payload)`` with one ``bytes`` message is the hot
path (one call per application event): its checks are inlined and it appends to the queue's
tail run (`SendQueue.put_one`), so its cost is a few hundred nanoseconds, not a chunk object,
a condition variable and a thread wake-up per message.  Nothing fails silently:

* each undeliverable group (one ``send()``, or consecutive single-message sends that went to
  one partition together) goes to ``on_error(topic, messages, exc)`` if given, else it is
  logged at ERROR; in both cases it is counted in ``stats.failed``;
* `flush` waits until everything queued so far is sent or failed, then raises `DeliveryError`
  if anything failed since the previous flush (``.messages`` = ``[(topic, [payload...]), ...]``);
* `close` drains the queue (no data is abandoned in it), then releases connections and the
  ZooKeeper session; it does not raise for failures (they were reported as above).  With a
  ``timeout`` it returns within about that long even if brokers hang: what is still queued
  then and the batch in flight are reported failed (``on_error``, ``stats.failed``, `flush`)
  instead of being sent.

Client-side checks at ``send()``: the topic name (`InvalidTopicError`), payload types, and
``max.message.size`` per *shallow* message (`MessageTooLargeError`; for compressed topics a
payload over the limit is compressed alone to see whether its wrapper fits).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from zkconsumer.errors import (
    ConfigurationError,
    DeliveryError,
    MessageTooLargeError,
    ProducerError,
    QueueFullError,
)
from zkconsumer.producer.cluster import ClusterView, StaticClusterView, ZkClusterView
from zkconsumer.producer.config import ProducerConfig
from zkconsumer.producer.partitioning import BrokerPartition, PartitionChooser
from zkconsumer.producer.pool import ConnectionPool
from zkconsumer.producer.queue import Chunk, SendQueue
from zkconsumer.producer.sender import Dispatcher, Failure
from zkconsumer.producer.stats import ProducerStats
from zkconsumer.producer.topics import spread_warning
from zkconsumer.protocol import Compression, encode_message_set, validate_topic
from zkconsumer.zk.session import ZkSession

__all__ = ["ErrorCallback", "Producer"]

log = logging.getLogger(__name__)

ErrorCallback = Callable[[str, list[bytes], Exception], None]

#: How long close() waits for an aborted sender thread to report its last batch.
_ABORT_GRACE = 5.0
#: Full batches the sender takes at once from a backlog (each stays its own message set;
#: together they go in one request per broker, cut at `MAX_REQUEST_BYTES`).
_MAX_BATCHES = 8


class Producer:
    """Send messages to a 0.7 cluster (see the module docstring)."""

    def __init__(self, config: ProducerConfig | None = None, *,
                 on_error: ErrorCallback | None = None,
                 rng: Callable[[int], int] | None = None,
                 sleep: Callable[[float], None] = time.sleep, **kwargs: Any) -> None:
        if config is None:
            try:
                config = ProducerConfig(**kwargs)
            except TypeError as exc:
                raise ConfigurationError(f"unknown producer setting: {exc}") from exc
        elif kwargs:
            config = config.replace(**kwargs)
        self.config = config
        self.stats = ProducerStats()
        self._on_error = on_error
        self._valid_topics: set[str] = set()
        self._spread_checked: set[str] = set()  # topics a keyed send checked (spread_warning)
        self._max_size = config.max_message_size
        self._closed = False
        self._failed_lock = threading.Lock()
        self._failed_since_flush: list[tuple[str, list[bytes]]] = []
        self._last_error: Exception | None = None
        self._view: ClusterView = (ZkClusterView(config) if config.zk_connect is not None
                                   else StaticClusterView(config))
        self._pool = ConnectionPool(config)
        self._dispatcher = Dispatcher(config, self._view, self._pool, self.stats,
                                      PartitionChooser(config.partitioner, rng=rng), sleep=sleep)
        self._queue: SendQueue | None = None
        self._thread: threading.Thread | None = None
        if config.producer_type == "async":
            self._queue = SendQueue(config.queue_size, config.enqueue_timeout_ms)
            self._thread = threading.Thread(target=self._run, name="producer-send",
                                            daemon=True)
            self._thread.start()

    # -- public API --------------------------------------------------------------------------

    def send(self, topic: str, messages: bytes | Sequence[bytes],
             key: str | bytes | None = None) -> None:
        """Send one message (``bytes``) or several (a sequence) to ``topic``, one partition."""
        queue = self._queue
        if (queue is not None and type(messages) is bytes and topic in self._valid_topics
                and len(messages) <= self._max_size
                and (key is None or type(key) is str or type(key) is bytes)):
            # The hot path of async mode (one message per call): every check of the general
            # path below holds (a closed producer's queue refuses the put), so enqueue now.
            try:
                queue.put_one(topic, key, messages)
            except QueueFullError:
                self.stats.add(dropped=1)
                raise
            return
        if self._closed:
            raise ProducerError("producer is closed")
        if topic not in self._valid_topics:
            validate_topic(topic)
            self._valid_topics.add(topic)
        payloads = _payload_list(messages)
        if not payloads:
            return
        if key is not None and not isinstance(key, (str, bytes)):
            raise TypeError(f"key must be str, bytes or None, not {type(key).__name__}")
        if key is not None and topic not in self._spread_checked:
            self._spread_checked.add(topic)
            warning = spread_warning(self._view, topic)
            if warning is not None:
                log.warning("%s", warning, extra={"event": "topic_not_spread", "topic": topic})
        self._check_sizes(topic, payloads)
        chunk = Chunk(topic, key, payloads)
        if self._queue is None:
            failures = self._dispatcher.send([chunk])
            if failures:
                for failed, exc in failures:
                    self.stats.add(failed=len(failed.payloads))
                    if isinstance(exc, MessageTooLargeError) and len(failures) == 1:
                        raise exc
                undelivered = [p for failed, _ in failures for p in failed.payloads]
                last = failures[-1][1]
                raise DeliveryError(
                    f"{len(undelivered)} of {len(payloads)} message(s) to {topic!r} not "
                    f"delivered after {self.config.num_retries} retries: {last}",
                    messages=undelivered) from last
            return
        try:
            if len(payloads) == 1:
                self._queue.put_one(topic, key, payloads[0])
            else:
                self._queue.put(chunk)
        except QueueFullError:
            self.stats.add(dropped=len(payloads))
            raise

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now; raise `DeliveryError` if anything failed since the
        last flush.  A no-op besides that check in sync mode."""
        if self._queue is not None and not self._queue.wait_empty(timeout):
            raise ProducerError(f"flush timed out after {timeout}s with "
                                f"{self._queue.pending} message(s) still pending")
        with self._failed_lock:
            failed, self._failed_since_flush = self._failed_since_flush, []
            last = self._last_error
        if failed:
            n = sum(len(m) for _, m in failed)
            raise DeliveryError(f"{n} message(s) could not be delivered since the last flush "
                                f"(last error: {last})", messages=failed)

    def close(self, timeout: float | None = None) -> None:
        """Drain the queue, stop the sender, release connections and ZooKeeper.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._queue is not None and self._thread is not None:
            self._queue.close()
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._abort_sender(timeout)
        self._pool.close_all()
        self._view.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def partitions_for(self, topic: str) -> list[BrokerPartition]:
        """The partition list ``send`` currently routes ``topic`` over (numeric order)."""
        return list(self._view.partitions(topic))

    def refresh(self) -> None:
        """Re-read brokers and topic partitions from ZooKeeper soon (watches do it anyway;
        this is for a caller that just changed them, e.g. `create_on_every_broker`)."""
        self._view.request_refresh()

    @property
    def zk_session(self) -> ZkSession | None:
        """The producer's ZooKeeper session (None in ``broker.list`` mode)."""
        return self._view.session if isinstance(self._view, ZkClusterView) else None

    @property
    def failed(self) -> int:
        """Messages given up on so far (``stats.failed``)."""
        return self.stats.failed

    # -- internals ---------------------------------------------------------------------------

    def _abort_sender(self, timeout: float | None) -> None:
        """close() deadline passed: fail the queue and the batch in flight, stop the thread."""
        if self._queue is None or self._thread is None:  # sync mode: nothing runs
            return
        log.error("producer sender did not finish within %ss; failing %d pending message(s)",
                  timeout, self._queue.pending)
        self._dispatcher.aborted = True  # no more retries for the batch in flight
        self._pool.close_all()  # its blocked request fails now, not after socket.timeout.ms
        leftover = self._queue.drain()
        if leftover:
            err = ProducerError(f"producer closed (timeout {timeout}s) before this was sent")
            self._report([(chunk, err) for chunk in leftover])
            self._queue.done(sum(len(c.payloads) for c in leftover))
        self._thread.join(_ABORT_GRACE)
        if self._thread.is_alive():
            log.error("producer sender still running %ss after being aborted", _ABORT_GRACE)

    def _check_sizes(self, topic: str, payloads: list[bytes]) -> None:
        limit = self.config.max_message_size
        if max(map(len, payloads)) <= limit:
            return
        codec = self.config.codec_for(topic)
        for i, p in enumerate(payloads):
            if len(p) <= limit:
                continue
            size = len(p)
            if codec != Compression.NONE:  # the wrapper is the shallow message
                size = len(encode_message_set([p], compression=codec)) - 10
                if size <= limit:
                    continue
            raise MessageTooLargeError(
                f"message {i} for {topic!r} is {size} bytes"
                f"{' compressed' if codec != Compression.NONE else ''}, over "
                f"max.message.size={limit}", topic=topic, size=size)

    def _run(self) -> None:
        queue = self._queue
        if queue is None:  # only started in async mode
            return
        linger = self.config.queue_time_ms / 1000.0
        while True:
            batches = queue.take_batches(self.config.batch_size, linger, _MAX_BATCHES)
            if not batches:
                return
            try:
                failures = self._dispatcher.send_batches(batches)
            except Exception as exc:  # a bug must not lose the batch silently
                log.exception("unexpected error sending a batch")
                failures = [(chunk, exc) for batch in batches for chunk in batch]
            if failures:
                self._report(failures)
            queue.done(sum(len(c.payloads) for batch in batches for c in batch))

    def _report(self, failures: list[Failure]) -> None:
        for chunk, exc in failures:
            messages = list(chunk.payloads)
            self.stats.add(failed=len(messages))
            with self._failed_lock:
                self._failed_since_flush.append((chunk.topic, messages))
                self._last_error = exc
            if self._on_error is not None:
                try:
                    self._on_error(chunk.topic, messages, exc)
                except Exception:
                    log.exception("producer on_error callback failed")
            else:
                log.error("%d message(s) to %r could not be delivered: %s", len(messages),
                          chunk.topic, exc)


def _payload_list(messages: bytes | Sequence[bytes]) -> list[bytes]:
    if isinstance(messages, bytes):
        return [messages]
    if isinstance(messages, (bytearray, memoryview)):
        return [bytes(messages)]
    if isinstance(messages, str):
        raise TypeError("messages must be bytes or a sequence of bytes, not str "
                        "(encode it first)")
    payloads = list(messages)
    if set(map(type, payloads)) <= {bytes}:  # the common case, checked at C speed
        return payloads
    for i, p in enumerate(payloads):
        if type(p) is not bytes:
            if isinstance(p, (bytearray, memoryview)):
                payloads[i] = bytes(p)
            else:
                raise TypeError(f"message {i} is {type(p).__name__}, not bytes")
    return payloads
