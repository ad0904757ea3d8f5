"""The bridge's source: the modern Kafka cluster it reads, as a confluent-kafka group member.

`SourceSpec` holds what ``--from kafka://...``, ``--group``, ``--topic`` / ``--whitelist`` and
the ``source.*`` properties say, and makes the consumer configuration: the bridge's own
settings (``read_committed``, auto-commit off: offsets move only over what 0.7 confirmed)
cannot be overridden by a ``source.*`` property.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror.targets import LIBRDKAFKA_LOG

__all__ = ["SourceSpec"]

_RESERVED = frozenset({"bootstrap.servers", "group.id", "enable.auto.commit",
                       "isolation.level", "on_commit", "error_cb"})


@dataclass(frozen=True)
class SourceSpec:
    """The modern cluster the bridge reads: bootstrap servers, group, topics (or a regex),
    and ``source.*`` librdkafka consumer properties (prefix stripped)."""

    bootstrap: tuple[str, ...]
    group: str
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap:
            raise ConfigurationError("--from needs kafka://HOST:PORT[,HOST:PORT]")
        if not self.group:
            raise ConfigurationError("--group is required")
        if not self.topics and not self.pattern:
            raise ConfigurationError("give --topic T (repeatable) or --whitelist RE")
        for key in self.options:
            if key in _RESERVED:
                raise ConfigurationError(f"source.{key} is set by the bridge")

    def consumer_config(self) -> dict[str, Any]:
        # fetch.queue.backoff.ms: librdkafka stops fetching for that long (default 1000 ms)
        # whenever its one local queue holds queued.min.messages of all partitions together:
        # a reader that empties 100000 small records in 0.1 s would idle the rest of the
        # second (measured on tansu at 100 B: 0.17 M msg/s; 0.8 M with 10 ms)
        conf: dict[str, Any] = {"session.timeout.ms": 10000, "fetch.wait.max.ms": 100,
                                "max.partition.fetch.bytes": 4 * 1048576,
                                "fetch.queue.backoff.ms": 10}
        conf.update(self.options)
        conf.update({"bootstrap.servers": ",".join(self.bootstrap), "group.id": self.group,
                     "enable.auto.commit": False, "isolation.level": "read_committed",
                     "auto.offset.reset": self.options.get("auto.offset.reset", "earliest"),
                     "logger": LIBRDKAFKA_LOG})
        return conf
