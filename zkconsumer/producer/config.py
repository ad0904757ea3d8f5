"""`ProducerConfig`: the 0.7 producer properties, typed, frozen and validated up front.

`ProducerConfig.from_properties` reads a 0.7 ``producer.properties`` (REFERENCE §3.3:
``zk.connect``, ``broker.list``, ``producer.type``, ``compression.codec`` ...); Python code
builds the object with keyword arguments (python names, e.g. ``queue_time_ms``).

Invariants (checked in ``__post_init__``; `ConfigurationError` names the 0.7 key):

* exactly one of ``zk.connect`` / ``broker.list``; ``broker.list`` entries are
  ``id:host:port`` with distinct ids; ``partitioner.class`` is refused with ``broker.list``
  (as in Scala);
* sizes, counts and timeouts are positive; ``queue.enqueueTimeout.ms`` is any integer
  (< 0 block, 0 raise at once, > 0 wait that long then raise);
* ``compression.codec`` is 0/1/2 or none/gzip/snappy.

Unknown keys are **rejected** (the message lists the known ones): a misspelt
``compresion.codec`` silently ignored would mean uncompressed traffic nobody notices.  The 0.7
keys this producer does not need -- ``serializer.class`` (we send bytes),
``callback.handler``, ``event.handler`` and their ``*.props`` -- are accepted with a warning
when they hold their 0.7 defaults or a standard encoder, and rejected otherwise.

Deliberate differences from 0.7 defaults: ``num.retries`` defaults to 3 (0.7: 0, a known pain
point: one broker hiccup lost the batch) and retries go to *another* partition;
``retry.backoff.ms`` (ours, 100) spaces them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import Compression
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.security_config import split_security_properties, zk_security_from

__all__ = ["PARTITIONERS", "PRODUCER_TYPES", "ProducerConfig", "StaticBroker", "parse_codec"]

log = logging.getLogger(__name__)

PRODUCER_TYPES = ("sync", "async")
#: hash: keyed -> Java hash (Scala DefaultPartitioner), unkeyed -> random.
#: round-robin: keyed -> Java hash, unkeyed -> round-robin.  random: every send random.
PARTITIONERS = ("hash", "random", "round-robin")
_SCALA_DEFAULT_PARTITIONER = "kafka.producer.DefaultPartitioner"
_STANDARD_ENCODERS = ("kafka.serializer.DefaultEncoder", "kafka.serializer.StringEncoder")


@dataclass(frozen=True)
class StaticBroker:
    """One ``id:host:port`` entry of ``broker.list``."""

    id: int
    host: str
    port: int


def parse_codec(value: object, key: str = "compression.codec") -> Compression:
    """``0``/``1``/``2``, ``none``/``gzip``/``snappy`` (or a `Compression`) to `Compression`."""
    if isinstance(value, Compression):
        return value
    text = str(value).strip().lower()
    names = {"none": 0, "gzip": 1, "snappy": 2, "0": 0, "1": 1, "2": 2}
    if isinstance(value, bool) or text not in names:
        raise ConfigurationError(f"{key} must be 0/none, 1/gzip or 2/snappy, got {value!r}")
    return Compression(names[text])


def parse_broker_list(value: str) -> tuple[StaticBroker, ...]:
    """Parse ``broker.list`` = ``id1:host1:port1,id2:host2:port2``."""
    brokers: list[StaticBroker] = []
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        parts = entry.split(":")
        if len(parts) != 3:
            raise ConfigurationError(f"broker.list entry {entry!r} is not brokerid:host:port")
        try:
            bid, port = int(parts[0]), int(parts[2])
        except ValueError:
            raise ConfigurationError(
                f"broker.list entry {entry!r}: broker id and port must be numbers") from None
        if bid < 0 or not parts[1] or not 0 < port < 65536:
            raise ConfigurationError(f"broker.list entry {entry!r} is not brokerid:host:port")
        brokers.append(StaticBroker(bid, parts[1], port))
    if not brokers:
        raise ConfigurationError("broker.list is empty")
    if len({b.id for b in brokers}) != len(brokers):
        raise ConfigurationError(f"broker.list {value!r} repeats a broker id")
    return tuple(brokers)


@dataclass(frozen=True)
class ProducerConfig:
    """Configuration of a `Producer` (python names; 0.7 names via `from_properties`)."""

    zk_connect: str | None = None
    broker_list: str | None = None
    producer_type: str = "sync"
    compression_codec: Compression = Compression.NONE
    compressed_topics: frozenset[str] = frozenset()
    batch_size: int = 200
    queue_time_ms: int = 5000
    queue_size: int = 10000
    enqueue_timeout_ms: int = 0
    max_message_size: int = 1000000
    confirm: bool = False
    num_retries: int = 3
    partitioner: str = "hash"
    connect_timeout_ms: int = 5000
    socket_timeout_ms: int = 30000
    buffer_size: int = 102400
    reconnect_interval: int = 30000
    reconnect_time_interval_ms: int = 10_000_000
    retry_backoff_ms: int = 100
    zk_read_num_retries: int = 3
    zk_session_timeout_ms: int = 6000
    zk_connection_timeout_ms: int = 6000
    # ZooKeeper TLS/SASL/digest and znode ACLs (zk.tls.*, zk.sasl.*, ...: docs/operations.md)
    zk_security: ZkSecurity = field(default_factory=ZkSecurity)

    def __post_init__(self) -> None:
        if (self.zk_connect is None) == (self.broker_list is None):
            raise ConfigurationError("exactly one of zk.connect and broker.list is required")
        if self.zk_connect is not None and (not isinstance(self.zk_connect, str)
                                            or not self.zk_connect.strip()):
            raise ConfigurationError("zk.connect must be a ZooKeeper connect string")
        if self.broker_list is not None:
            parse_broker_list(self.broker_list)
        if self.producer_type not in PRODUCER_TYPES:
            raise ConfigurationError(
                f"producer.type must be sync or async, got {self.producer_type!r}")
        if self.partitioner not in PARTITIONERS:
            raise ConfigurationError(f"partitioner must be one of {', '.join(PARTITIONERS)}, "
                                     f"got {self.partitioner!r}")
        object.__setattr__(self, "compression_codec", parse_codec(self.compression_codec))
        if isinstance(self.compressed_topics, str) or not all(
                isinstance(t, str) for t in self.compressed_topics):
            raise ConfigurationError("compressed.topics must be a set of topic names")
        object.__setattr__(self, "compressed_topics", frozenset(self.compressed_topics))
        for name in ("batch_size", "queue_time_ms", "queue_size", "max_message_size",
                     "connect_timeout_ms", "socket_timeout_ms", "buffer_size",
                     "reconnect_interval", "zk_session_timeout_ms", "zk_connection_timeout_ms"):
            _check_int(self, name, minimum=1)
        for name in ("num_retries", "retry_backoff_ms", "zk_read_num_retries"):
            _check_int(self, name, minimum=0)
        for name in ("enqueue_timeout_ms", "reconnect_time_interval_ms"):
            _check_int(self, name, minimum=None)
        if not isinstance(self.confirm, bool):
            raise ConfigurationError(f"confirm must be a boolean, got {self.confirm!r}")

    # -- derived -----------------------------------------------------------------------------

    @property
    def static_brokers(self) -> tuple[StaticBroker, ...]:
        """The parsed ``broker.list`` (empty in ZooKeeper mode)."""
        return parse_broker_list(self.broker_list) if self.broker_list is not None else ()

    def codec_for(self, topic: str) -> Compression:
        """The codec of ``topic``: ``compression.codec`` if ``compressed.topics`` is empty or
        names it, else none (Scala's async DefaultEventHandler rule, applied in sync mode too)."""
        if self.compression_codec == Compression.NONE:
            return Compression.NONE
        if self.compressed_topics and topic not in self.compressed_topics:
            return Compression.NONE
        return self.compression_codec

    def replace(self, **changes: Any) -> ProducerConfig:
        """A copy with python-named fields changed (validated again)."""
        try:
            return dataclasses.replace(self, **changes)
        except TypeError as exc:
            raise ConfigurationError(f"unknown producer setting: {exc}") from exc

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: Any) -> ProducerConfig:
        """Build from 0.7 property names (REFERENCE §3.3); ``overrides`` use python names."""
        security, props = split_security_properties(props)
        kwargs: dict[str, Any] = {"zk_security": zk_security_from(None, security)}
        unknown: list[str] = []
        for key, raw in props.items():
            if key in _PROPS:
                pyname, conv = _PROPS[key]
                kwargs[pyname] = conv(key, raw)
            elif key == "partitioner.class":
                if "broker.list" in props:
                    raise ConfigurationError("partitioner.class cannot be used with broker.list")
                kwargs.setdefault("partitioner", _partitioner_class(raw))
            elif key in _IGNORED:
                _check_ignored(key, raw)
            elif key in _HARMLESS:
                continue
            else:
                unknown.append(key)
        if unknown:
            raise ConfigurationError(
                f"unknown producer propert{'y' if len(unknown) == 1 else 'ies'} "
                f"{', '.join(sorted(unknown))}; known: {', '.join(sorted(KNOWN_PROPERTIES))}")
        if "zk.connectiontimeout.ms" not in props and "zk_session_timeout_ms" in kwargs:
            kwargs["zk_connection_timeout_ms"] = kwargs["zk_session_timeout_ms"]
        kwargs.update(overrides)
        try:
            return cls(**kwargs)
        except TypeError as exc:  # an override that is not a field
            raise ConfigurationError(f"unknown producer setting: {exc}") from exc


def _check_int(cfg: ProducerConfig, name: str, *, minimum: int | None) -> None:
    value = getattr(cfg, name)
    if isinstance(value, bool) or not isinstance(value, int) or (
            minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        raise ConfigurationError(f"{_PY_TO_PROP.get(name, name)} must be an integer{bound}, "
                                 f"got {value!r}")


def _int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigurationError(f"{key} must be an integer, got {raw!r}") from None


def _str(key: str, raw: str) -> str:
    return raw.strip()


def _bool(key: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"{key} must be true or false, got {raw!r}")


def _codec(key: str, raw: str) -> Compression:
    return parse_codec(raw, key)


def _topics(key: str, raw: str) -> frozenset[str]:
    return frozenset(t.strip() for t in raw.split(",") if t.strip())


def _partitioner_class(raw: str) -> str:
    value = raw.strip()
    if value == _SCALA_DEFAULT_PARTITIONER:
        return "hash"
    if value in PARTITIONERS:
        return value
    raise ConfigurationError(
        f"partitioner.class {value!r} is not supported: use {_SCALA_DEFAULT_PARTITIONER} "
        f"(Java-hash compatible) or partitioner={'|'.join(PARTITIONERS)}")


def _check_ignored(key: str, raw: str) -> None:
    value = raw.strip()
    if key == "serializer.class" and value in _STANDARD_ENCODERS:
        log.warning("ignoring serializer.class=%s: this producer sends bytes as given", value)
        return
    if key != "serializer.class" and not value:
        return
    raise ConfigurationError(f"{key}={value!r} is not supported by this producer "
                             "(pluggable Scala classes cannot be loaded)")


_PROPS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "zk.connect": ("zk_connect", _str),
    "broker.list": ("broker_list", _str),
    "producer.type": ("producer_type", _str),
    "compression.codec": ("compression_codec", _codec),
    "compressed.topics": ("compressed_topics", _topics),
    "batch.size": ("batch_size", _int),
    "queue.time": ("queue_time_ms", _int),
    "queue.size": ("queue_size", _int),
    "queue.enqueueTimeout.ms": ("enqueue_timeout_ms", _int),
    "max.message.size": ("max_message_size", _int),
    "reconnect.interval": ("reconnect_interval", _int),
    "reconnect.time.interval.ms": ("reconnect_time_interval_ms", _int),
    "connect.timeout.ms": ("connect_timeout_ms", _int),
    "socket.timeout.ms": ("socket_timeout_ms", _int),
    "buffer.size": ("buffer_size", _int),
    "num.retries": ("num_retries", _int),
    "zk.read.num.retries": ("zk_read_num_retries", _int),
    "zk.sessiontimeout.ms": ("zk_session_timeout_ms", _int),
    "zk.connectiontimeout.ms": ("zk_connection_timeout_ms", _int),
    # ours
    "confirm": ("confirm", _bool),
    "partitioner": ("partitioner", _str),
    "retry.backoff.ms": ("retry_backoff_ms", _int),
}
_IGNORED = ("serializer.class", "callback.handler", "callback.handler.props",
            "event.handler", "event.handler.props")
# Shared ZKConfig keys a producer does not use (a common file may hold them).
_HARMLESS = ("zk.synctime.ms",)
KNOWN_PROPERTIES = frozenset(_PROPS) | {"partitioner.class", *_IGNORED, *_HARMLESS}
_PY_TO_PROP = {py: prop for prop, (py, _) in _PROPS.items()}
