"""`ConsumerConfig`: the 0.7 consumer properties, typed, frozen and validated up front.

A deployment replacing Scala ``ZookeeperConsumerConnector`` processes hands us the very
``consumer.properties`` those used, so `ConsumerConfig.from_properties` understands the 0.7
names and defaults of REFERENCE §3.1-3.2 (``groupid``, ``zk.connect``, ``fetch.size``,
``rebalance.backoff.ms`` ...).  Python code builds the object with keyword arguments instead.

Invariants (checked in ``__post_init__``, `ConfigurationError` names the key):

* every size and interval is positive (``consumer_timeout_ms`` may be negative = block);
* ``autooffset_reset`` is ``smallest`` or ``largest``.  Scala accepts any string and throws
  only when it is first needed, deep inside a rebalance or a fetcher; we fail at construction;
* ``fetch_size <= max_fetch_size``, ``zk.connect`` and ``groupid`` are non-empty.

Like Scala we do not fail on keys we do not know (a shared file often holds producer or
broker keys too): `from_properties` logs one warning listing them.  ``mirror.*`` keys (read
only by 0.7.0's embedded mirroring) and ``shallowiterator.enable`` are accepted; the former
are ignored with a warning.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.errors import ConfigurationError
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.security_config import split_security_properties, zk_security_from

__all__ = ["AUTO_OFFSET_RESETS", "ConsumerConfig"]

log = logging.getLogger(__name__)

AUTO_OFFSET_RESETS = ("smallest", "largest")
MiB = 1024 * 1024

# Keys from 0.8+ that people paste into 0.7 configs: point at the 0.7 name in the warning.
_LATER_NAMES = {
    "group.id": "groupid",
    "consumer.id": "consumerid",
    "zookeeper.connect": "zk.connect",
    "zookeeper.session.timeout.ms": "zk.sessiontimeout.ms",
    "zookeeper.connection.timeout.ms": "zk.connectiontimeout.ms",
    "zookeeper.sync.time.ms": "zk.synctime.ms",
    "auto.commit.enable": "autocommit.enable",
    "auto.commit.interval.ms": "autocommit.interval.ms",
    "auto.offset.reset": "autooffset.reset",
    "fetch.message.max.bytes": "fetch.size",
    "queued.max.message.chunks": "queuedchunks.max",
    "socket.receive.buffer.bytes": "socket.buffersize",
}


@dataclass(frozen=True)
class ConsumerConfig:
    """Configuration of one `GroupConsumer` (python names; 0.7 names in `from_properties`)."""

    group_id: str
    zk_connect: str
    consumer_id: str | None = None
    socket_timeout_ms: int = 30000
    socket_buffersize: int = 65536
    fetch_size: int = 1048576
    max_fetch_size: int = 64 * MiB
    fetcher_backoff_ms: int = 1000
    autocommit_enable: bool = True
    autocommit_interval_ms: int = 10000
    queuedchunks_max: int = 10
    rebalance_retries_max: int = 4
    rebalance_backoff_ms: int = 2000
    autooffset_reset: str = "smallest"
    consumer_timeout_ms: int = -1
    zk_session_timeout_ms: int = 6000
    zk_connection_timeout_ms: int = 6000
    auto_ack: bool = True
    # ZooKeeper TLS/SASL/digest and znode ACLs (zk.tls.*, zk.sasl.*, ...: docs/operations.md)
    zk_security: ZkSecurity = field(default_factory=ZkSecurity)
    # Additions (documented in docs/consumer.md and docs/architecture.md):
    zk_synctime_ms: int = 2000
    shallow_iterator_enable: bool = False
    num_streams: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ConfigurationError("groupid is required (a non-empty consumer group name)")
        if "/" in self.group_id:
            raise ConfigurationError(f"groupid {self.group_id!r} must not contain '/'")
        if not isinstance(self.zk_connect, str) or not self.zk_connect.strip():
            raise ConfigurationError("zk.connect is required (host:port[,host:port][/chroot])")
        if self.consumer_id is not None and (not self.consumer_id or "/" in self.consumer_id):
            raise ConfigurationError(f"consumerid {self.consumer_id!r} must be non-empty "
                                     "and contain no '/'")
        for name in ("socket_timeout_ms", "socket_buffersize", "fetch_size", "max_fetch_size",
                     "fetcher_backoff_ms", "autocommit_interval_ms", "queuedchunks_max",
                     "rebalance_retries_max", "zk_session_timeout_ms",
                     "zk_connection_timeout_ms", "zk_synctime_ms", "num_streams"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigurationError(f"{_PY_TO_PROP[name]} must be a positive integer, "
                                         f"got {value!r}")
        if isinstance(self.rebalance_backoff_ms, bool) or not isinstance(
                self.rebalance_backoff_ms, int) or self.rebalance_backoff_ms < 0:
            raise ConfigurationError("rebalance.backoff.ms must be an integer >= 0, "
                                     f"got {self.rebalance_backoff_ms!r}")
        if isinstance(self.consumer_timeout_ms, bool) or not isinstance(
                self.consumer_timeout_ms, int):
            raise ConfigurationError("consumer.timeout.ms must be an integer "
                                     f"(negative = block forever), got {self.consumer_timeout_ms!r}")
        if self.fetch_size > self.max_fetch_size:
            raise ConfigurationError(f"fetch.size ({self.fetch_size}) must not exceed "
                                     f"max.fetch.size ({self.max_fetch_size})")
        if self.autooffset_reset not in AUTO_OFFSET_RESETS:
            raise ConfigurationError(
                f"autooffset.reset must be 'smallest' or 'largest', got {self.autooffset_reset!r}"
            )
        for name in ("autocommit_enable", "auto_ack", "shallow_iterator_enable"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{_PY_TO_PROP[name]} must be a boolean")

    # ---------------------------------------------------------------------------------------

    @property
    def socket_timeout(self) -> float:
        """``socket.timeout.ms`` in seconds (what the client layer takes)."""
        return self.socket_timeout_ms / 1000.0

    def replace(self, **changes: Any) -> ConsumerConfig:
        """A copy with some python-named fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_properties(cls, props: Mapping[str, str], **overrides: Any) -> ConsumerConfig:
        """Build from 0.7 property names (REFERENCE §3.1-3.2); ``overrides`` use python names.

        Defaults that depend on other keys follow Scala: ``rebalance.backoff.ms`` defaults to
        ``zk.synctime.ms`` and ``zk.connectiontimeout.ms`` to ``zk.sessiontimeout.ms``.
        0.7.0's ``backoff.increment.ms`` is read as ``fetcher.backoff.ms`` when the latter is
        absent.
        """
        security, props = split_security_properties(props)
        kwargs: dict[str, Any] = {"zk_security": zk_security_from(None, security)}
        unknown: list[str] = []
        ignored: list[str] = []
        for key, raw in props.items():
            if key in _PROPS:
                pyname, conv = _PROPS[key]
                kwargs[pyname] = conv(key, raw)
            elif key == "backoff.increment.ms":
                kwargs.setdefault("fetcher_backoff_ms", _int(key, raw))
            elif key.startswith("mirror."):
                ignored.append(key)
            else:
                unknown.append(key)
        if "fetcher.backoff.ms" in props:  # the 0.7.1+ name wins over the 0.7.0 one
            kwargs["fetcher_backoff_ms"] = _int("fetcher.backoff.ms", props["fetcher.backoff.ms"])
        if "rebalance.backoff.ms" not in props and "zk_synctime_ms" in kwargs:
            kwargs["rebalance_backoff_ms"] = kwargs["zk_synctime_ms"]
        if "zk.connectiontimeout.ms" not in props and "zk_session_timeout_ms" in kwargs:
            kwargs["zk_connection_timeout_ms"] = kwargs["zk_session_timeout_ms"]
        if ignored:
            log.warning("ignoring %s: 0.7.0 embedded-mirror settings (use `zkconsumer mirror`)",
                        ", ".join(sorted(ignored)))
        if unknown:
            hints = [f"{k} (0.7 name: {_LATER_NAMES[k]})" if k in _LATER_NAMES else k
                     for k in sorted(unknown)]
            log.warning("ignoring unknown consumer properties: %s", ", ".join(hints))
        kwargs.update(overrides)
        for required, prop in (("group_id", "groupid"), ("zk_connect", "zk.connect")):
            if required not in kwargs:
                raise ConfigurationError(f"{prop} is required")
        try:
            return cls(**kwargs)
        except TypeError as exc:  # an override with a name that is not a field
            raise ConfigurationError(f"invalid consumer config override: {exc}") from exc


def _str(key: str, raw: str) -> str:
    return str(raw).strip()


def _int(key: str, raw: str) -> int:
    try:
        return int(str(raw).strip())
    except ValueError as exc:
        raise ConfigurationError(f"{key} must be an integer, got {raw!r}") from exc


def _bool(key: str, raw: str) -> bool:
    value = str(raw).strip().lower()
    if value == "true":
        return True
    if value == "false":
        return False
    raise ConfigurationError(f"{key} must be 'true' or 'false', got {raw!r}")


_PROPS: dict[str, tuple[str, Callable[[str, str], Any]]] = {
    "groupid": ("group_id", _str),
    "consumerid": ("consumer_id", _str),
    "zk.connect": ("zk_connect", _str),
    "zk.sessiontimeout.ms": ("zk_session_timeout_ms", _int),
    "zk.connectiontimeout.ms": ("zk_connection_timeout_ms", _int),
    "zk.synctime.ms": ("zk_synctime_ms", _int),
    "socket.timeout.ms": ("socket_timeout_ms", _int),
    "socket.buffersize": ("socket_buffersize", _int),
    "fetch.size": ("fetch_size", _int),
    "max.fetch.size": ("max_fetch_size", _int),
    "fetcher.backoff.ms": ("fetcher_backoff_ms", _int),
    "autocommit.enable": ("autocommit_enable", _bool),
    "autocommit.interval.ms": ("autocommit_interval_ms", _int),
    "queuedchunks.max": ("queuedchunks_max", _int),
    "rebalance.retries.max": ("rebalance_retries_max", _int),
    "rebalance.backoff.ms": ("rebalance_backoff_ms", _int),
    "autooffset.reset": ("autooffset_reset", _str),
    "consumer.timeout.ms": ("consumer_timeout_ms", _int),
    "shallowiterator.enable": ("shallow_iterator_enable", _bool),
    "auto.ack": ("auto_ack", _bool),
    "num.streams": ("num_streams", _int),
}
_PY_TO_PROP = {py: prop for prop, (py, _) in _PROPS.items()}
