"""Configuration of the dev broker: Kafka 0.7.2 ``server.properties`` keys, validated up front.

Job: one frozen `BrokerConfig` built either from keyword arguments (Python names) or from a
0.7 properties mapping (`BrokerConfig.from_properties`, 0.7 key names, server/KafkaConfig.scala),
with CLI flags applied on top as overrides.

Invariants
    * Every value is checked here, when the object is built; a bad value raises
      `ConfigurationError` naming the 0.7 key (``log.file.size: must be >= 5, got 3``), so
      nothing fails later inside a request thread.
    * Defaults are the 0.7.2 defaults (port 6667, flush every 500 messages or 3000 ms, 1 GiB
      segments, 1 partition, ``max.message.size`` 1000000, ``max.socket.request.bytes``
      100 MiB).  The dev cluster and the test fixtures pass smaller, faster values explicitly.
    * Unknown keys are reported by `from_properties` (a WARNING each) and ignored, like the
      reference broker, which never looks at keys it does not know.
    * Keys the reference reads but the dev broker does not act on (``num.threads``,
      ``monitoring.period.secs``, ``zk.synctime.ms``) are accepted silently.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from zkconsumer.errors import ConfigurationError
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.security_config import split_security_properties, zk_security_from

__all__ = ["INT_MAX", "PROPERTY_NAMES", "BrokerConfig", "parse_topic_map"]

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
_MIN_HEADER_SIZE = 5  # Message.MinHeaderSize: the smallest legal log.file.size

#: 0.7 property key -> BrokerConfig field.
PROPERTY_NAMES: Mapping[str, str] = MappingProxyType({
    "brokerid": "broker_id",
    "port": "port",
    "hostname": "host",
    "log.dir": "log_dir",
    "num.partitions": "num_partitions",
    "topic.partition.count.map": "topic_partitions",
    "log.file.size": "log_file_size",
    "topic.log.file.size": "topic_log_file_size",
    "log.roll.hours": "log_roll_hours",
    "topic.log.roll.hours": "topic_log_roll_hours",
    "log.retention.hours": "log_retention_hours",
    "topic.log.retention.hours": "topic_log_retention_hours",
    "log.retention.size": "log_retention_size",
    "topic.log.retention.size": "topic_log_retention_size",
    "log.cleanup.interval.mins": "log_cleanup_interval_mins",
    "log.flush.interval": "flush_interval",
    "log.default.flush.interval.ms": "flush_interval_ms",
    "log.default.flush.scheduler.interval.ms": "flush_scheduler_interval_ms",
    "topic.flush.intervals.ms": "topic_flush_intervals_ms",
    "max.message.size": "max_message_size",
    "max.socket.request.bytes": "max_request_size",
    "max.topic.name.length": "max_topic_name_length",
    "socket.send.buffer": "socket_send_buffer",
    "socket.receive.buffer": "socket_receive_buffer",
    "zk.connect": "zk_connect",
    "enable.zookeeper": "enable_zookeeper",
    "zk.sessiontimeout.ms": "zk_session_timeout_ms",
    "zk.connectiontimeout.ms": "zk_connection_timeout_ms",
})
_IGNORED_KEYS = frozenset({"num.threads", "monitoring.period.secs", "zk.synctime.ms"})
_FIELD_TO_KEY = {v: k for k, v in PROPERTY_NAMES.items()}
_MAP_FIELDS = frozenset({"topic_partitions", "topic_log_file_size", "topic_log_roll_hours",
                         "topic_log_retention_hours", "topic_log_retention_size",
                         "topic_flush_intervals_ms"})


def _key(name: str) -> str:
    """The name to show in errors: the 0.7 key when there is one, else the Python name."""
    return _FIELD_TO_KEY.get(name, name)


def parse_topic_map(text: str, key: str) -> dict[str, int]:
    """Parse ``topic1:8,topic2:16`` (Utils.getCSVMap) into ``{"topic1": 8, "topic2": 16}``.

    Unlike Scala, which logs a malformed entry and drops it, this raises: a typo in a
    partition map silently changes where data goes.
    """
    out: dict[str, int] = {}
    if not text.strip():
        return out
    for entry in text.split(","):
        topic, sep, num = entry.rpartition(":")
        topic = topic.strip()
        if not sep or not topic:
            raise ConfigurationError(f"{key}: malformed entry {entry!r} (expected topic:number)")
        try:
            out[topic] = int(num.strip())
        except ValueError as exc:
            raise ConfigurationError(f"{key}: malformed number in {entry!r}") from exc
    return out


def _parse_bool(text: str, key: str) -> bool:
    low = text.strip().lower()
    if low in ("true", "yes", "1", "on"):
        return True
    if low in ("false", "no", "0", "off"):
        return False
    raise ConfigurationError(f"{key}: expected true or false, got {text!r}")


def _parse_int(text: str, key: str) -> int:
    try:
        return int(text.strip())
    except ValueError as exc:
        raise ConfigurationError(f"{key}: expected an integer, got {text!r}") from exc


@dataclass(frozen=True)
class BrokerConfig:
    """Everything the dev broker needs; see docs/dev-broker.md for each key."""

    broker_id: int
    log_dir: str
    port: int = 6667
    #: advertised host in /brokers/ids/N; None = the bind address when that is one address,
    #: else this machine's IP (like the reference)
    host: str | None = None
    #: address the server socket binds to: loopback unless told otherwise (0.7 brokers have
    #: no authentication, so a dev broker is not put on the network by default); "" or
    #: "0.0.0.0" = all interfaces, as the reference does (containers: compose/ sets it)
    bind: str = "127.0.0.1"
    num_partitions: int = 1
    topic_partitions: Mapping[str, int] = field(default_factory=dict)
    log_file_size: int = 1024 * 1024 * 1024
    topic_log_file_size: Mapping[str, int] = field(default_factory=dict)
    log_roll_hours: int = 24 * 7
    topic_log_roll_hours: Mapping[str, int] = field(default_factory=dict)
    log_retention_hours: int = 24 * 7
    topic_log_retention_hours: Mapping[str, int] = field(default_factory=dict)
    log_retention_size: int = -1
    topic_log_retention_size: Mapping[str, int] = field(default_factory=dict)
    log_cleanup_interval_mins: int = 10
    flush_interval: int = 500
    flush_interval_ms: int = 3000
    flush_scheduler_interval_ms: int = 3000
    topic_flush_intervals_ms: Mapping[str, int] = field(default_factory=dict)
    #: os.fsync on every flush (the reference always forces; off by default for speed)
    fsync: bool = False
    max_message_size: int = 1000000
    max_request_size: int = 104857600
    max_topic_name_length: int = 255
    socket_send_buffer: int = 102400
    socket_receive_buffer: int = 102400
    zk_connect: str | None = None
    enable_zookeeper: bool = True
    zk_session_timeout_ms: int = 6000
    zk_connection_timeout_ms: int = 6000
    #: ZooKeeper TLS/SASL/digest and the ACL of our registrations (zk.tls.*, zk.acl, ...)
    zk_security: ZkSecurity = field(default_factory=ZkSecurity)
    #: how long to retry when /brokers/ids/N is held by someone else before refusing to start
    #: (0 = refuse at once, like the reference; useful after a kill -9 within the session timeout)
    registration_wait_ms: int = 0

    def __post_init__(self) -> None:
        for name in _MAP_FIELDS:  # freeze the maps so the config stays immutable
            value = getattr(self, name)
            if isinstance(value, str):
                value = parse_topic_map(value, _key(name))
            object.__setattr__(self, name, MappingProxyType(dict(value)))
        self._check_int("broker_id", 0, INT_MAX)
        self._check_int("port", 0, 65535)
        self._check_int("num_partitions", 1, INT_MAX)
        self._check_int("log_file_size", _MIN_HEADER_SIZE, INT_MAX)
        self._check_int("log_roll_hours", 1, INT_MAX)
        self._check_int("log_retention_hours", 1, INT_MAX)
        self._check_int("log_retention_size", -1, 2**63 - 1)
        self._check_int("log_cleanup_interval_mins", 1, INT_MAX)
        self._check_int("flush_interval", 1, INT_MAX)
        self._check_int("flush_interval_ms", 1, INT_MAX)
        self._check_int("flush_scheduler_interval_ms", 1, INT_MAX)
        self._check_int("max_message_size", 0, INT_MAX)
        self._check_int("max_request_size", 1, INT_MAX)
        self._check_int("max_topic_name_length", 1, INT_MAX)
        self._check_int("socket_send_buffer", 1, INT_MAX)
        self._check_int("socket_receive_buffer", 1, INT_MAX)
        self._check_int("zk_session_timeout_ms", 1, INT_MAX)
        self._check_int("zk_connection_timeout_ms", 1, INT_MAX)
        self._check_int("registration_wait_ms", 0, INT_MAX)
        if not isinstance(self.log_dir, str) or not self.log_dir:
            raise ConfigurationError("log.dir: required")
        for name in _MAP_FIELDS:
            low = 0 if name == "topic_log_retention_size" else 1
            for topic, n in getattr(self, name).items():
                if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= INT_MAX:
                    raise ConfigurationError(
                        f"{_key(name)}: value for topic {topic!r} must be >= {low}, got {n!r}")
        if self.host is not None and (not self.host or ":" in self.host):
            raise ConfigurationError(
                f"hostname: {self.host!r} cannot be used (empty, or contains ':' which the "
                "creator:host:port znode format cannot carry)")
        if self.zk_connect is not None and not self.zk_connect.strip():
            raise ConfigurationError("zk.connect: empty")

    def _check_int(self, name: str, low: int, high: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{_key(name)}: expected an integer, got {value!r}")
        if not low <= value <= high:
            raise ConfigurationError(f"{_key(name)}: must be in [{low}, {high}], got {value}")

    # ---------------------------------------------------------------------------------------
    @property
    def uses_zookeeper(self) -> bool:
        """True when the broker registers itself (zk.connect set and enable.zookeeper)."""
        return self.enable_zookeeper and self.zk_connect is not None

    def partitions_for(self, topic: str) -> int:
        """The broker-local partition count: topic.partition.count.map, else num.partitions."""
        return self.topic_partitions.get(topic, self.num_partitions)

    def segment_size_for(self, topic: str) -> int:
        return self.topic_log_file_size.get(topic, self.log_file_size)

    def roll_ms_for(self, topic: str) -> int:
        return self.topic_log_roll_hours.get(topic, self.log_roll_hours) * 3600 * 1000

    def flush_ms_for(self, topic: str) -> int:
        return self.topic_flush_intervals_ms.get(topic, self.flush_interval_ms)

    def retention_ms_for(self, topic: str) -> int:
        return self.topic_log_retention_hours.get(topic, self.log_retention_hours) * 3600 * 1000

    def retention_size_for(self, topic: str) -> int:
        return self.topic_log_retention_size.get(topic, self.log_retention_size)

    def replace(self, **changes: Any) -> BrokerConfig:
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------------------------------
    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: Any) -> BrokerConfig:
        """Build from 0.7 ``server.properties`` keys; ``overrides`` (Python names) win.

        ``log.default.flush.interval.ms`` defaults to the scheduler interval, as in 0.7.2.
        """
        security, props = split_security_properties(props)
        kwargs: dict[str, Any] = {"zk_security": zk_security_from(None, security)}
        for key, text in props.items():
            name = PROPERTY_NAMES.get(key)
            if name is None:
                if key not in _IGNORED_KEYS:
                    log.warning("unknown broker property %r ignored", key)
                continue
            kwargs[name] = _CONVERTERS.get(name, _parse_int)(text, key)
        if "flush_interval_ms" not in kwargs and "flush_scheduler_interval_ms" in kwargs:
            kwargs["flush_interval_ms"] = kwargs["flush_scheduler_interval_ms"]
        if "zk_connection_timeout_ms" not in kwargs and "zk_session_timeout_ms" in kwargs:
            kwargs["zk_connection_timeout_ms"] = kwargs["zk_session_timeout_ms"]
        kwargs.update({k: v for k, v in overrides.items() if v is not None})
        if "broker_id" not in kwargs:
            raise ConfigurationError("brokerid: required")
        if "log_dir" not in kwargs:
            raise ConfigurationError("log.dir: required")
        try:
            return cls(**kwargs)
        except TypeError as exc:  # an unknown override name
            raise ConfigurationError(f"broker configuration: {exc}") from exc


def _string(text: str, key: str) -> str:
    return text.strip()


def _optional_string(text: str, key: str) -> str | None:
    return text.strip() or None


_CONVERTERS: dict[str, Callable[[str, str], Any]] = {
    "host": _optional_string,
    "log_dir": _string,
    "zk_connect": _optional_string,
    "enable_zookeeper": _parse_bool,
    **{name: parse_topic_map for name in _MAP_FIELDS},
}
