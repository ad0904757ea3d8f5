"""The modern-Kafka side of the mirror: a thin, typed wrapper over confluent-kafka.

Why confluent-kafka (docs/mirror.md has the long form): librdkafka is an order of magnitude
faster than a pure-Python client (hundreds of thousands of small records per second), it
implements the idempotent and the transactional producer (KIP-98), and its manylinux wheels
bundle librdkafka: nothing to build.  We never hand-write the 0.8+ protocol.

`Target` is the interface the at-least-once engine (`zkconsumer.mirror.engine`) drives;
`KafkaTarget` implements it for ``kafka://`` and `zkconsumer.mirror.kafka07.Kafka07Target`
for ``kafka07://``.  The exactly-once engine (`zkconsumer.mirror.exactly_once`) builds its
own transactional producers from `producer_config` and uses `KafkaAdmin`.

Contract of `Target.send` (one message) and `Target.send_run` (the messages of one source
partition run, ``(value, partition or None, key or None)`` each): the outcome is reported
exactly once -- for a run, once for all of it, failed if any message failed -- through
``on_done(None)`` or ``on_done(exc)``, possibly from another thread, possibly before it
returns.  ``stream`` names the ordering stream (the engine passes the run's source partition):
messages of one stream reach each target partition in the order sent; messages of different
streams have no mutual order.  Transient
problems (broker down, timeouts, a rebuilt client) are reported through ``on_done``; only a
condition retrying cannot cure raises `TargetError` synchronously.

`KafkaTarget` invariants:

* producer defaults: ``acks=all``, ``enable.idempotence=true``, ``partitioner=murmur2_random``
  (the Java client's key hash), auto-creation off.  ``target.*`` options are librdkafka
  properties and may override anything but the bootstrap list, the partitioner and
  ``transactional.id``;
* a pool of ``mirror.target.producers`` producers (default 1; `zkconsumer.mirror.producer_pool`
  says when more help).  A stream is bound to one producer for good, so each source
  partition's messages stay in order; each producer has a *poll thread* serving its delivery
  callbacks (librdkafka calls them only from ``poll``/``flush``), so the engine's tracker
  hears of acknowledgements while the mirror loop is busy polling the source;
* if the target refuses idempotence (a pre-0.11 broker, or ``target.acks`` other than
  ``all``) we log a WARNING once and rebuild without it -- acks=all still holds, but a
  client-internal retry may then write a duplicate.  The refusal is seen by building the
  first producer (configuration) or by any producer's error (broker): either way every
  producer built afterwards is non-idempotent, and the engine's `reset` rebuilds them all;
* every producer connects to the target's brokers when built (``enable.sparse.connections``
  off unless ``target.*`` says otherwise).  An idempotent librdkafka producer asks for its
  producer id on a 500 ms timer, and only from a broker it is connected to; with sparse
  connections it connects when the first message is queued, so the first run waited up to a
  second (0.5-1 s measured on tansu, before any acknowledgement) -- now the id is there
  about 0.5 s after `open`, usually while the 0.7 group is still being joined;
* `reset` throws every producer away: after an outage the broker may have forgotten our
  producer ids, and fresh producers are the cure; `close` flushes and closes every one.
  Topic existence and partition counts come from the admin client's DescribeTopics, because
  a metadata request auto-creates topics on some brokers (tansu does, even when asked not
  to).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from zkconsumer.errors import ConfigurationError, TargetError
from zkconsumer.extras import require
from zkconsumer.mirror.producer_pool import ProducerPool
from zkconsumer.mirror.routing import murmur2_partition

__all__ = ["DoneCallback", "KafkaAdmin", "KafkaTarget", "RunItem", "Target",
           "kafka_producer_options", "producer_config"]

log = logging.getLogger(__name__)
#: librdkafka's own log lines (connection refused, ...) go through Python logging, not stderr.
LIBRDKAFKA_LOG = logging.getLogger("zkconsumer.mirror.librdkafka")

DoneCallback = Callable[[BaseException | None], None]
#: One message of a run: value, target partition (None = by key), key.
RunItem = tuple[bytes, "int | None", "bytes | None"]

_RESERVED = frozenset({"bootstrap.servers", "metadata.broker.list", "partitioner",
                       "transactional.id", "dr_cb", "dr_msg_cb", "on_delivery",
                       "error_cb"})
# librdkafka error names that mean "this broker will not do idempotence", not "try again".
_NO_IDEMPOTENCE = frozenset({"_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION",
                             "CLUSTER_AUTHORIZATION_FAILED", "UNSUPPORTED_FOR_MESSAGE_FORMAT"})
_ADMIN_KEYS = ("security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
               "sasl.password", "ssl.ca.location", "ssl.certificate.location",
               "ssl.key.location", "ssl.key.password", "socket.timeout.ms")


class Target(Protocol):
    """What the at-least-once mirror engine needs from a target cluster."""

    description: str

    def open(self) -> None: ...
    def partition_count(self, topic: str) -> int: ...
    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None: ...
    def hash_partition(self, data: bytes, n: int) -> int: ...
    def send(self, topic: str, value: bytes, partition: int | None, key: bytes | None,
             on_done: DoneCallback, *, stream: Hashable = None) -> None: ...
    def send_run(self, topic: str, items: Sequence[RunItem], on_done: DoneCallback, *,
                 stream: Hashable = None) -> None: ...
    def flush(self, timeout: float) -> bool: ...
    def reset(self) -> None: ...
    def close(self, timeout: float = 5.0) -> None: ...


def kafka_producer_options(options: Mapping[str, str]) -> dict[str, str]:
    """``target.*`` properties (prefix stripped) -> librdkafka producer properties.

    librdkafka names are dotted already (``linger.ms``, ``compression.type``); unknown names
    and bad values fail here, before anything is consumed, instead of inside the mirror.
    """
    require("mirror", "a kafka:// target")
    from confluent_kafka import KafkaException, Producer

    out: dict[str, str] = {}
    for key, raw in options.items():
        name = key.strip()
        if name in _RESERVED:
            raise ConfigurationError(f"target.{key} is set by the mirror and cannot be overridden")
        out[name] = str(raw).strip()
    try:  # librdkafka validates names and values at construction; nothing connects yet
        Producer({**out, "logger": LIBRDKAFKA_LOG})  # no bootstrap.servers: no connection
    except KafkaException as exc:
        raise ConfigurationError(f"target.* settings: librdkafka says {exc.args[0].str()}") \
            from exc
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"target.* settings: {exc}") from exc
    return out


def producer_config(bootstrap: Iterable[str], options: Mapping[str, str], *,
                    client_id: str, idempotent: bool = True,
                    transactional_id: str | None = None) -> dict[str, Any]:
    """The mirror's producer settings: fast batching defaults, then ``target.*``, then the
    settings the mirror owns (bootstrap, partitioner, idempotence/transactions)."""
    conf: dict[str, Any] = {
        "client.id": client_id,
        "logger": LIBRDKAFKA_LOG,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1048576,
        "batch.num.messages": 100000,
        "queue.buffering.max.messages": 1000000,
        "queue.buffering.max.kbytes": 1048576,
        "allow.auto.create.topics": False,
        "enable.idempotence": idempotent,
    }
    conf.update(options)
    conf["bootstrap.servers"] = ",".join(bootstrap)
    conf["partitioner"] = "murmur2_random"
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        conf["enable.idempotence"] = True
    return conf


class KafkaAdmin:
    """DescribeTopics / CreateTopics on the target (never a metadata request: see module
    docstring)."""

    def __init__(self, bootstrap: Iterable[str], options: Mapping[str, str] | None = None, *,
                 client_id: str = "zkconsumer-mirror-admin", timeout: float = 10.0) -> None:
        from confluent_kafka.admin import AdminClient

        self.bootstrap = list(bootstrap)
        self.description = "kafka://" + ",".join(self.bootstrap)
        self.timeout = timeout
        conf: dict[str, Any] = {k: v for k, v in (options or {}).items() if k in _ADMIN_KEYS}
        conf.update({"bootstrap.servers": ",".join(self.bootstrap), "client.id": client_id,
                     "logger": LIBRDKAFKA_LOG})
        self._admin = AdminClient(conf)

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` on the target; `TargetError` if it does not exist.
        Transient failures (broker down) raise `confluent_kafka.KafkaException`."""
        from confluent_kafka import KafkaError, KafkaException, TopicCollection

        future = self._admin.describe_topics(TopicCollection([topic]),
                                             request_timeout=self.timeout)[topic]
        try:
            desc = future.result(timeout=self.timeout + 5)
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise TargetError(
                    f"target topic {topic!r} does not exist on {self.description}; create it "
                    "(or pass --create-topics --partitions N)") from exc
            raise
        return len(desc.partitions)

    def create_topic(self, topic: str, partitions: int, replication_factor: int,
                     config: Mapping[str, str] | None = None) -> None:
        """Create ``topic``; an existing one is fine (another mirror process won the race)."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        new = NewTopic(topic, partitions, replication_factor, config=dict(config or {}))
        future = self._admin.create_topics([new], request_timeout=self.timeout)[topic]
        try:
            future.result(timeout=self.timeout + 5)
            log.info("created target topic %s (%d partitions, replication %d)",
                     topic, partitions, replication_factor)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            log.info("target topic %s already exists", topic)


class KafkaTarget:
    """A ``kafka://`` target for the at-least-once engine (see module docstring)."""

    def __init__(self, bootstrap: Iterable[str], options: Mapping[str, str] | None = None,
                 *, client_id: str = "zkconsumer-mirror", producers: int = 1) -> None:
        self.bootstrap = list(bootstrap)
        self.description = "kafka://" + ",".join(self.bootstrap)
        opts = kafka_producer_options(options or {})
        self._idempotent = opts.pop("enable.idempotence", "true").lower() not in ("false", "0")
        self._options = opts
        self._client_id = client_id
        self._pool = ProducerPool(producers, self._build)
        self._admin: KafkaAdmin | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def _build(self) -> Any:
        from confluent_kafka import KafkaException, Producer

        def on_error(err: Any) -> None:
            if err.fatal() and not self.check_idempotence_error(err.name(), err.str()):
                log.error("target producer fatal error: %s", err.str())

        conf = producer_config(self.bootstrap, self._options, client_id=self._client_id,
                               idempotent=self._idempotent)
        conf["error_cb"] = on_error
        if "enable.sparse.connections" not in self._options:
            conf["enable.sparse.connections"] = False  # the PID at open, not at first send
        try:
            return Producer(conf)
        except KafkaException as exc:
            if not self._idempotent:
                raise ConfigurationError(f"target client configuration: "
                                         f"{exc.args[0].str()}") from exc
            self._disable_idempotence(exc.args[0].str())
            conf["enable.idempotence"] = False
            return Producer(conf)

    def open(self) -> None:
        """Build the producers and their poll threads (idempotent if the target allows:
        the fallback happens while building the first one, so the pool is never mixed)."""
        self._pool.open()

    def check_idempotence_error(self, name: str, text: str) -> bool:
        """A librdkafka error named ``name`` that means "no idempotence here" turns it off
        for the next producers (the engine resets the whole pool after a failure); True if it
        did."""
        if self._idempotent and name in _NO_IDEMPOTENCE:
            self._disable_idempotence(text)
            return True
        return False

    def _disable_idempotence(self, reason: str) -> None:
        if not self._idempotent:
            return
        log.warning("target %s refused the idempotent producer (%s); falling back to a "
                    "non-idempotent producer: a client-internal retry may write a duplicate",
                    self.description, reason)
        self._idempotent = False

    @property
    def idempotent(self) -> bool:
        return self._idempotent

    @property
    def producers(self) -> tuple[Any, ...]:
        """The pool's current producers (empty when not open)."""
        return self._pool.producers

    def _admin_client(self) -> KafkaAdmin:
        if self._admin is None:
            self._admin = KafkaAdmin(self.bootstrap, self._options,
                                     client_id=self._client_id + "-admin")
        return self._admin

    def reset(self) -> None:
        """Discard every producer (and the admin client); the next `open`/`send` builds new
        ones.  Messages still queued are purged: their callbacks report failures, which the
        engine resends."""
        self._admin = None
        self._pool.reset()

    def close(self, timeout: float = 5.0) -> None:
        self._admin = None
        self._pool.close(timeout)

    # -- topics -------------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        return self._admin_client().partition_count(topic)

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        self._admin_client().create_topic(topic, partitions, replication_factor)

    def hash_partition(self, data: bytes, n: int) -> int:
        return murmur2_partition(data, n)

    # -- data ---------------------------------------------------------------------------------

    def send(self, topic: str, value: bytes, partition: int | None, key: bytes | None,
             on_done: DoneCallback, *, stream: Hashable = None) -> None:
        self.send_run(topic, [(value, partition, key)], on_done, stream=stream)

    def send_run(self, topic: str, items: Sequence[RunItem], on_done: DoneCallback, *,
                 stream: Hashable = None) -> None:
        """The batch path: the run straight into ``stream``'s producer, one shared countdown
        for its delivery reports (served by the producer's poll thread).

        A run bound for one partition (or all by key) -- every run under ``preserve`` -- is
        one ``produce_batch`` call instead of a Python ``produce`` call per message (for one
        partition librdkafka enqueues it under one lock).  Other runs are produced message by
        message.
        """
        run = _RunCountdown(len(items), on_done, self.check_idempotence_error)
        if not items:
            return
        partition = items[0][1]
        if all(p == partition for _v, p, _k in items):
            self._produce_batch(topic, items, partition, run, stream)
        else:
            self._produce_each(topic, items, run, stream)

    def _producer(self, stream: Hashable) -> Any:
        """``stream``'s producer, building the pool first if it is not open (again)."""
        pool = self._pool
        producer = pool.producer(stream)
        while producer is None:
            pool.open()
            producer = pool.producer(stream)
        return producer

    def _produce_batch(self, topic: str, items: Sequence[RunItem], partition: int | None,
                       run: _RunCountdown, stream: Hashable) -> None:
        """``produce_batch`` the run; the messages librdkafka refuses come back marked.

        A refused *suffix* for a full queue is produced again once deliveries made room (the
        accepted prefix is queued already: order holds).  Any other refusal -- or a full
        queue that let a later message in (room freed meanwhile: a gap) -- fails the run, so
        its offsets are never acknowledged; the messages queued around the gap are delivered
        anyway, duplicates the resend makes (at-least-once).
        """
        from confluent_kafka import KafkaError, KafkaException

        msgs: list[dict[str, Any]] = [{"value": value, "key": key} for value, _p, key in items]
        part = -1 if partition is None else partition
        delivered = run.delivered
        while True:
            try:
                producer = self._producer(stream)
                good = producer.produce_batch(topic, msgs, partition=part,
                                              on_delivery=delivered)
            except KafkaException as exc:  # no producer could be built: retried as a run
                run.abandon(len(msgs), exc)
                return
            if good == len(msgs):
                return
            refused = [i for i, m in enumerate(msgs) if "_error" in m]
            first = refused[0]
            codes = {msgs[i]["_error"].code() for i in refused}
            if codes == {KafkaError._QUEUE_FULL} and len(refused) == len(msgs) - first:
                msgs = msgs[first:]
                for m in msgs:
                    del m["_error"]
                producer.poll(0.05)  # queue full: let deliveries drain (backpressure)
                continue
            err = msgs[first]["_error"]
            failure = KafkaException(err)
            run.abandon(len(refused), failure)
            if KafkaError.MSG_SIZE_TOO_LARGE in codes:
                size = max(len(msgs[i]["value"]) for i in refused)
                raise TargetError(
                    f"target client refuses a {size}-byte message for {topic}: "
                    f"{err.str()} (raise target.message.max.bytes)") from failure
            return  # transient: the engine retries the run

    def _produce_each(self, topic: str, items: Sequence[RunItem], run: _RunCountdown,
                      stream: Hashable) -> None:
        """``produce`` per message (a run spread over several target partitions)."""
        from confluent_kafka import KafkaError, KafkaException

        delivered = run.delivered
        producer: Any = None
        for i, (value, partition, key) in enumerate(items):
            while True:
                try:
                    if producer is None:
                        producer = self._producer(stream)
                    producer.produce(topic, value, key, -1 if partition is None else partition,
                                     on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)  # queue full: let deliveries drain (backpressure)
                except KafkaException as exc:
                    err = exc.args[0]
                    run.abandon(len(items) - i, exc)
                    if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                        raise TargetError(
                            f"target client refuses a {len(value)}-byte message for {topic}: "
                            f"{err.str()} (raise target.message.max.bytes)") from exc
                    return  # transient: the engine retries the run

    def flush(self, timeout: float) -> bool:
        return self._pool.flush(timeout)


class _RunCountdown:
    """The delivery reports of one run, counted down to one ``on_done``.

    Lock-free: each report takes one number from an `itertools.count`, whose ``__next__`` is
    a single C call and so atomic under the GIL; the report that draws the run's size is the
    last and calls ``on_done``, exactly once, whichever thread serves it (a poll thread, a
    purging reset, the mirror loop abandoning the rest of a run).  An error is stored
    *before* its report draws its number, so the last report sees every earlier error.
    """

    __slots__ = ("_check", "_error", "_n", "_next", "_on_done")

    def __init__(self, n: int, on_done: DoneCallback,
                 check: Callable[[str, str], bool]) -> None:
        self._n = n
        self._next = itertools.count(1).__next__
        self._error: BaseException | None = None
        self._on_done = on_done
        self._check = check
        if n == 0:
            on_done(None)

    def delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            from confluent_kafka import KafkaException

            self._check(err.name(), err.str())
            if self._error is None:
                self._error = KafkaException(err)
        if self._next() == self._n:
            self._on_done(self._error)

    def abandon(self, n: int, exc: BaseException) -> None:
        """``n`` messages of the run were never handed to librdkafka: they failed."""
        if self._error is None:
            self._error = exc
        for _ in range(n):
            if self._next() == self._n:
                self._on_done(self._error)
