"""The modern-Kafka side of the mirror: a thin, typed wrapper over kafka-python.

Why kafka-python (docs/mirror.md has the long form): it is pure Python -- no librdkafka to
build or match on the 0.7-era hosts a migration runs on -- and since 2.2 it implements the
idempotent producer (KIP-98) with ``acks=all``, which is what "nothing lost, no retry
duplicates inside the client" needs.  We never hand-write the 0.8+ protocol.

`Target` is the interface the mirror engine drives; `KafkaTarget` implements it for
``kafka://`` and `zkconsumer.mirror.kafka07.Kafka07Target` for ``kafka07://``.

Contract of `Target.send`: it reports the outcome exactly once through ``on_done(None)`` or
``on_done(exc)``, possibly from another thread, possibly before it returns.  Transient
problems (broker down, timeouts, a rebuilt client) are reported through ``on_done``; only a
condition retrying cannot cure raises `TargetError` synchronously.

`KafkaTarget` invariants:

* producer defaults: ``acks="all"``, ``enable_idempotence=True``, ``allow_auto_create_topics``
  off (creating topics is ``--create-topics``, never a side effect).  ``target.*`` options
  may override anything but the serializers, the partitioner and the bootstrap list;
* if the target refuses idempotence (a pre-0.11 broker, or one whose InitProducerId fails) we
  log a WARNING once and rebuild without it -- acks=all still holds, but a client-internal
  retry may then write a duplicate;
* `reset` throws the producer away: after an outage the broker may have forgotten our
  producer id (UnknownProducerId), and a fresh producer is the cure.  Topic existence and
  partition counts come from the admin client's DescribeTopics, because a metadata request
  auto-creates topics on some brokers (tansu does, even when asked not to).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from zkconsumer.errors import ConfigurationError, TargetError
from zkconsumer.mirror.routing import murmur2_partition

__all__ = ["DoneCallback", "KafkaTarget", "Target", "kafka_producer_options"]

log = logging.getLogger(__name__)

DoneCallback = Callable[[BaseException | None], None]

_RESERVED = frozenset({"bootstrap_servers", "key_serializer", "value_serializer",
                       "partitioner", "transactional_id"})
# Errors that mean "this broker will not do idempotence", not "try again".
_NO_IDEMPOTENCE = frozenset({"UnsupportedVersionError", "ClusterAuthorizationFailedError",
                             "UnsupportedForMessageFormatError", "KafkaConfigurationError"})


class Target(Protocol):
    """What the mirror engine needs from a target cluster."""

    description: str

    def open(self) -> None: ...
    def partition_count(self, topic: str) -> int: ...
    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None: ...
    def hash_partition(self, data: bytes, n: int) -> int: ...
    def send(self, topic: str, value: bytes, partition: int | None, key: bytes | None,
             on_done: DoneCallback) -> None: ...
    def flush(self, timeout: float) -> bool: ...
    def reset(self) -> None: ...
    def close(self, timeout: float = 5.0) -> None: ...


def _convert(value: str) -> Any:
    text = value.strip()
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def kafka_producer_options(options: Mapping[str, str]) -> dict[str, Any]:
    """``target.*`` properties (prefix stripped, dotted) -> kafka-python KafkaProducer kwargs.

    Unknown names fail here, before anything is consumed, instead of inside kafka-python.
    """
    from kafka import KafkaProducer

    known = set(KafkaProducer.DEFAULT_CONFIG)
    out: dict[str, Any] = {}
    for key, raw in options.items():
        name = key.replace(".", "_").replace("-", "_")
        if name in _RESERVED:
            raise ConfigurationError(f"target.{key} is set by the mirror and cannot be overridden")
        if name not in known:
            raise ConfigurationError(f"target.{key}: kafka-python KafkaProducer has no "
                                     f"option {name!r}")
        out[name] = _convert(raw) if isinstance(raw, str) else raw
    return out


class KafkaTarget:
    """A ``kafka://`` target (see module docstring)."""

    def __init__(self, bootstrap: Iterable[str], options: Mapping[str, str] | None = None,
                 *, client_id: str = "zkconsumer-mirror") -> None:
        self.bootstrap = list(bootstrap)
        self.description = "kafka://" + ",".join(self.bootstrap)
        self._options = kafka_producer_options(options or {})
        self._client_id = client_id
        self._idempotent = bool(self._options.pop("enable_idempotence", True))
        self._lock = threading.Lock()
        self._producer: Any = None
        self._admin: Any = None

    # -- lifecycle ----------------------------------------------------------------------------

    def _producer_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "client_id": self._client_id,
            "acks": "all",
            "allow_auto_create_topics": False,
            "linger_ms": 5,
            "batch_size": 262144,
        }
        kwargs.update(self._options)
        kwargs.update(bootstrap_servers=self.bootstrap, enable_idempotence=self._idempotent)
        return kwargs

    def open(self) -> None:
        """Build the producer (idempotent if the target allows).  Transient failures raise
        kafka-python errors; the engine backs off and calls again."""
        from kafka import KafkaProducer
        from kafka.errors import KafkaConfigurationError

        with self._lock:
            if self._producer is not None:
                return
            try:
                self._producer = KafkaProducer(**self._producer_kwargs())
            except KafkaConfigurationError as exc:
                if not self._idempotent:
                    raise ConfigurationError(f"target client configuration: {exc}") from exc
                self._disable_idempotence(exc)
                self._producer = KafkaProducer(**self._producer_kwargs())

    def _disable_idempotence(self, exc: BaseException) -> None:
        log.warning("target %s refused the idempotent producer (%s); falling back to acks=all "
                    "without idempotence: a client-internal retry may write a duplicate",
                    self.description, exc)
        self._idempotent = False

    @property
    def idempotent(self) -> bool:
        return self._idempotent

    def _admin_client(self) -> Any:
        from kafka import KafkaAdminClient

        if self._admin is None:
            kwargs = {k: v for k, v in self._options.items()
                      if k in ("request_timeout_ms", "security_protocol", "sasl_mechanism",
                               "sasl_plain_username", "sasl_plain_password", "ssl_cafile",
                               "ssl_certfile", "ssl_keyfile")}
            self._admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                           client_id=self._client_id + "-admin", **kwargs)
        return self._admin

    def reset(self) -> None:
        """Discard the producer (and admin client); the next `open`/`send` builds new ones."""
        with self._lock:
            producer, self._producer = self._producer, None
            admin, self._admin = self._admin, None
        for client in (producer, admin):
            if client is not None:
                try:
                    client.close(timeout=0) if client is producer else client.close()
                except Exception as exc:  # closing a broken client must not stop the retry
                    log.debug("closing target client: %r", exc)

    def close(self, timeout: float = 5.0) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
            admin, self._admin = self._admin, None
        if producer is not None:
            producer.close(timeout=timeout)
        if admin is not None:
            admin.close()

    # -- topics -------------------------------------------------------------------------------

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` on the target; `TargetError` if it does not exist."""
        described = self._admin_client().describe_topics([topic])
        for t in described:
            if t.get("name") != topic:
                continue
            code = t.get("error_code", 0)
            if code == 3:  # UNKNOWN_TOPIC_OR_PARTITION
                raise TargetError(
                    f"target topic {topic!r} does not exist on {self.description}; create it "
                    "(or pass --create-topics --partitions N)")
            if code:
                raise TargetError(f"describing target topic {topic!r}: error code {code}")
            return len(t.get("partitions") or [])
        raise TargetError(f"target {self.description} did not describe topic {topic!r}")

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None:
        """Create ``topic``; an existing one is fine (another mirror process won the race)."""
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        try:
            self._admin_client().create_topics(
                [NewTopic(topic, partitions, replication_factor)])
            log.info("created target topic %s (%d partitions, replication %d)",
                     topic, partitions, replication_factor)
        except TopicAlreadyExistsError:
            log.info("target topic %s already exists", topic)

    def hash_partition(self, data: bytes, n: int) -> int:
        return murmur2_partition(data, n)

    # -- data ---------------------------------------------------------------------------------

    def send(self, topic: str, value: bytes, partition: int | None, key: bytes | None,
             on_done: DoneCallback) -> None:
        from kafka.errors import KafkaError, MessageSizeTooLargeError

        try:
            if self._producer is None:
                self.open()
            future = self._producer.send(topic, value=value, key=key, partition=partition)
        except MessageSizeTooLargeError as exc:
            raise TargetError(f"target client refuses a {len(value)}-byte message for "
                              f"{topic}: {exc} (raise target.max.request.size)") from exc
        except (KafkaError, OSError, AttributeError, ValueError) as exc:
            # ValueError: "Unrecognized partition" from stale metadata (the retry round
            # re-reads partition counts).  AttributeError: the producer was reset by another
            # thread between the check and the call.  Transient: report, the engine retries.
            self._check_idempotence_error(exc)
            on_done(exc)
            return

        def failed(exc: BaseException) -> None:
            self._check_idempotence_error(exc)
            on_done(exc)

        future.add_callback(lambda _metadata: on_done(None))
        future.add_errback(failed)

    def _check_idempotence_error(self, exc: BaseException) -> None:
        if self._idempotent and type(exc).__name__ in _NO_IDEMPOTENCE:
            self._disable_idempotence(exc)

    def flush(self, timeout: float) -> bool:
        from kafka.errors import KafkaTimeoutError

        producer = self._producer
        if producer is None:
            return True
        try:
            producer.flush(timeout=timeout)
        except KafkaTimeoutError:
            return False
        return True
