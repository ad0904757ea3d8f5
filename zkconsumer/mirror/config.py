"""`MirrorConfig`: what one ``zkconsumer mirror`` process does, typed, frozen, validated up front.

The mirror is configured from three places, merged in this order (later wins): the
``--config`` properties file, ``--set key=value`` flags, and the dedicated CLI flags.  One
properties namespace carries everything, split by prefix:

* no prefix -- 0.7 consumer properties (``groupid``, ``zk.connect``, ``fetch.size`` ...), the
  same file a Scala MirrorMaker's ``--consumer.config`` used; handed to `ConsumerConfig`;
* ``mirror.*`` -- the mirror's own knobs (in-flight window, commit interval, timeouts,
  transactions, the at-least-once target's producer pool);
* ``target.*`` -- the target client: librdkafka producer properties (``target.linger.ms``,
  ``target.compression.type``) for ``kafka://``, or 0.7 producer properties
  (``target.compression.codec``) for ``kafka07://``.

Invariants: the target URL parses (`TargetSpec.parse`); ``preserve``/``hash``/``round-robin``
only; ``--create-topics`` needs ``--partitions`` and a ``kafka://`` target (0.7 has no
create-topic API: its brokers create logs on first produce); windows, intervals, timeouts and
``mirror.target.producers`` are positive (the latter at most `MAX_TARGET_PRODUCERS`).  Every
failure is a `ConfigurationError` naming the key or flag.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from zkconsumer.errors import ConfigurationError

__all__ = [
    "MIRROR_PROPERTIES",
    "MirrorConfig",
    "Partitioning",
    "TargetSpec",
    "parse_topic_map",
    "split_properties",
]


class Partitioning(str, Enum):
    """How a mirrored message picks its target partition (see docs/mirror.md)."""

    PRESERVE = "preserve"  # source partition index i -> target partition i % n (keeps order)
    HASH = "hash"  # murmur2 (kafka://) / Java hash (kafka07://) of --key-regex group 1 or payload
    ROUND_ROBIN = "round-robin"  # even spread, no ordering guarantee


_HOSTPORT = re.compile(r"^([A-Za-z0-9._-]+|\[[0-9A-Fa-f:]+\]):([0-9]{1,5})$")


@dataclass(frozen=True)
class TargetSpec:
    """Where the mirror writes: ``kafka://h:p[,h:p]`` (0.8+) or ``kafka07://zk[/chroot]``."""

    kind: str  # "kafka" | "kafka07"
    bootstrap: tuple[str, ...] = ()  # kafka: host:port list
    zk_connect: str | None = None  # kafka07: host:port[,host:port][/chroot]

    @classmethod
    def parse(cls, url: str) -> TargetSpec:
        url = url.strip()
        scheme, sep, rest = url.partition("://")
        if not sep or not rest:
            raise ConfigurationError(
                f"--to {url!r}: expected kafka://HOST:PORT[,HOST:PORT] or kafka07://ZK[/chroot]")
        if scheme == "kafka":
            hosts = tuple(h.strip() for h in rest.rstrip("/").split(",") if h.strip())
            for h in hosts:
                m = _HOSTPORT.match(h)
                if not m or not 0 < int(m.group(2)) < 65536:
                    raise ConfigurationError(f"--to {url!r}: {h!r} is not HOST:PORT")
            if not hosts:
                raise ConfigurationError(f"--to {url!r}: no bootstrap servers")
            return cls("kafka", bootstrap=hosts)
        if scheme == "kafka07":
            return cls("kafka07", zk_connect=rest)
        raise ConfigurationError(f"--to {url!r}: unknown scheme {scheme!r} "
                                 "(use kafka:// for 0.8+ clusters, kafka07:// for 0.7)")

    def __str__(self) -> str:
        if self.kind == "kafka":
            return "kafka://" + ",".join(self.bootstrap)
        return f"kafka07://{self.zk_connect}"


def parse_topic_map(text: str | None) -> dict[str, str]:
    """``old:new,old2:new2`` -> ``{old: new}``.  Unmapped topics keep their name.

    Several sources may map onto one target topic (a merge); one source cannot map twice.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        old, sep, new = item.partition(":")
        old, new = old.strip(), new.strip()
        if not sep or not old or not new:
            raise ConfigurationError(f"--topic-map: {item!r} is not OLD:NEW")
        if old in result and result[old] != new:
            raise ConfigurationError(f"--topic-map: {old!r} is mapped twice")
        validate_target_topic(new)
        result[old] = new
    return result


_MODERN_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def validate_target_topic(name: str) -> None:
    """Modern Kafka's topic rule (legal chars ``[a-zA-Z0-9._-]``, <= 249, not ``.``/``..``).

    0.7 allowed far more (REFERENCE §4.6); a 0.7 topic the target cannot name must be renamed
    with ``--topic-map``, and we say so before consuming anything.
    """
    if name in (".", "..") or not _MODERN_TOPIC.match(name):
        raise ConfigurationError(
            f"target topic {name!r} is not a legal Kafka topic name ([a-zA-Z0-9._-], at most "
            "249 characters); rename it with --topic-map OLD:NEW")


def split_properties(props: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str],
                                                         dict[str, str]]:
    """Split one namespace into (consumer, ``mirror.*`` without prefix, ``target.*`` without)."""
    consumer: dict[str, str] = {}
    mirror: dict[str, str] = {}
    target: dict[str, str] = {}
    for key, value in props.items():
        if key.startswith("target."):
            target[key[len("target."):]] = value
        elif key.startswith("mirror.") and key[len("mirror."):] in MIRROR_PROPERTIES:
            mirror[key[len("mirror."):]] = value
        else:
            consumer[key] = value
    return consumer, mirror, target


#: ``mirror.<name>`` properties -> MirrorConfig field.  (0.7.0's ``mirror.topics.whitelist``
#: etc. are not in this table: they fall through to the consumer, which warns about them.)
MIRROR_PROPERTIES: dict[str, str] = {
    "max.in.flight": "max_in_flight",
    "poll.batch": "poll_batch",
    "commit.interval.ms": "commit_interval_ms",
    "shutdown.timeout.ms": "shutdown_timeout_ms",
    "revoke.timeout.ms": "revoke_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "retry.backoff.max.ms": "retry_backoff_max_ms",
    "progress.interval.ms": "progress_interval_ms",
    "transaction.interval.ms": "transaction_interval_ms",
    "transaction.max.messages": "transaction_max_messages",
    "transaction.timeout.ms": "transaction_timeout_ms",
    "checkpoint.topic": "checkpoint_topic",
    "bridge.flush.wait.ms": "flush_wait_ms",
    "bridge.round.bytes": "bridge_round_bytes",
    "target.producers": "target_producers",
}
_STRING_PROPERTIES = frozenset({"checkpoint.topic"})
#: Each producer is a connection per broker and a poll thread: a sanity bound, not a tuning.
MAX_TARGET_PRODUCERS = 64


@dataclass(frozen=True)
class MirrorConfig:
    """Everything but the source consumer's own settings (those are a `ConsumerConfig`)."""

    target: TargetSpec
    topic_map: Mapping[str, str] = field(default_factory=dict)
    partitioning: Partitioning = Partitioning.PRESERVE
    key_regex: str | None = None
    create_topics: bool = False
    partitions: int | None = None
    replication_factor: int = 1
    #: Messages sent but not yet acknowledged by the target, over all partitions.  When full the
    #: mirror stops polling the 0.7 group: backpressure instead of unbounded memory.
    max_in_flight: int = 10000
    poll_batch: int = 500
    #: How often acknowledged offsets are written to ZooKeeper.
    commit_interval_ms: int = 2000
    #: SIGTERM: how long to wait for in-flight acks before committing what is safe and exiting.
    shutdown_timeout_ms: int = 30000
    #: Rebalance: how long on_revoked waits for the revoked partitions' in-flight acks.
    revoke_timeout_ms: int = 5000
    retry_backoff_ms: int = 500
    retry_backoff_max_ms: int = 30000
    progress_interval_ms: int = 5000
    #: ``kafka://`` only: transactions + target-side checkpoints (the default), or today's
    #: at-least-once mode (``--at-least-once``) for targets without transactions.
    exactly_once: bool = True
    #: Exactly-once: how often each lane commits its transaction, and after how many messages
    #: produced (all lanes together) every lane commits early -- the in-flight bound of this
    #: mode (a commit waits for every queued message, so it also bounds commit and stop time).
    transaction_interval_ms: int = 200
    transaction_max_messages: int = 50000
    #: Exactly-once: the producer's commit/init timeout (and librdkafka transaction.timeout.ms).
    transaction_timeout_ms: int = 60000
    checkpoint_topic: str = "__zkconsumer_mirror_checkpoints"
    #: Bridge (``--from kafka://``): how long a batch left by a crashed member may take to
    #: show in the 0.7 broker's flushed end before it counts as not landed (the broker's
    #: ``log.default.flush.interval.ms`` plus a margin).
    flush_wait_ms: int = 10000
    #: Bridge: how big (encoded bytes, all 0.7 partitions) a round may grow by merging the
    #: polls read while the writer is busy (`zkconsumer.mirror.pipeline`).  The bridge holds
    #: about two rounds in memory; on a shared 0.7 partition a crash may write its share of
    #: one round again.  Keep it below the 0.7 brokers' ``max.socket.request.bytes``.
    bridge_round_bytes: int = 32 * 1024 * 1024
    #: ``kafka://`` at-least-once: producers in the target's pool (each source partition keeps
    #: to one).  1 by default: on a local tansu the mirror is CPU-bound and 4 measured slower
    #: (docs/mirror.md); more may help where one connection's five in-flight requests bind.
    target_producers: int = 1
    #: ``target.*`` options, prefix stripped, values still strings (the target converts them).
    target_options: Mapping[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    progress: bool = False
    #: ``--startup-timeout``: how long to keep trying to reach the 0.7 ZooKeeper at start
    #: (None: no limit; see `zkconsumer.consumer.joining`).
    startup_timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.target, TargetSpec):
            raise ConfigurationError("--to is required")
        try:
            object.__setattr__(self, "partitioning", Partitioning(self.partitioning))
        except ValueError as exc:
            raise ConfigurationError(f"--partitioning must be hash, round-robin or preserve, "
                                     f"got {self.partitioning!r}") from exc
        object.__setattr__(self, "topic_map", dict(self.topic_map))
        object.__setattr__(self, "target_options", dict(self.target_options))
        for target in self.topic_map.values():
            if self.target.kind == "kafka":
                validate_target_topic(target)
        if self.key_regex is not None:
            if self.partitioning is not Partitioning.HASH:
                raise ConfigurationError("--key-regex only applies to --partitioning hash")
            try:
                pattern = re.compile(self.key_regex.encode())
            except re.error as exc:
                raise ConfigurationError(f"--key-regex {self.key_regex!r}: {exc}") from exc
            if pattern.groups < 1:
                raise ConfigurationError(
                    f"--key-regex {self.key_regex!r} needs a capture group (group 1 is the key)")
        if self.create_topics:
            if self.target.kind != "kafka":
                raise ConfigurationError(
                    "--create-topics needs a kafka:// target (0.7 brokers create topics on first "
                    "produce, with their num.partitions)")
            if self.partitions is None:
                raise ConfigurationError("--create-topics needs --partitions N")
        for name, flag in (("partitions", "--partitions"),):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ConfigurationError(f"{flag} must be a positive integer, got {value!r}")
        _positive(self.replication_factor, "--replication-factor")
        for fname in ("max_in_flight", "poll_batch", "commit_interval_ms",
                      "shutdown_timeout_ms", "revoke_timeout_ms", "retry_backoff_ms",
                      "retry_backoff_max_ms", "progress_interval_ms",
                      "transaction_interval_ms", "transaction_max_messages",
                      "transaction_timeout_ms", "flush_wait_ms", "target_producers",
                      "bridge_round_bytes"):
            _positive(getattr(self, fname), "mirror." + _FIELD_TO_PROP[fname])
        if self.target_producers > MAX_TARGET_PRODUCERS:
            raise ConfigurationError(f"mirror.target.producers must be at most "
                                     f"{MAX_TARGET_PRODUCERS}, got {self.target_producers}")
        if self.target.kind == "kafka" and self.exactly_once:
            validate_target_topic(self.checkpoint_topic)
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigurationError("mirror.retry.backoff.max.ms must be >= mirror.retry.backoff.ms")
        if self.metrics_port is not None and not 0 <= self.metrics_port < 65536:
            raise ConfigurationError(f"--metrics-port {self.metrics_port} is not a port")
        if self.startup_timeout is not None and not self.startup_timeout > 0:
            raise ConfigurationError(f"--startup-timeout must be > 0, got {self.startup_timeout}")

    def key_pattern(self) -> re.Pattern[bytes] | None:
        return re.compile(self.key_regex.encode()) if self.key_regex is not None else None

    def target_topic(self, source_topic: str) -> str:
        return self.topic_map.get(source_topic, source_topic)

    @classmethod
    def from_properties(cls, target: TargetSpec, mirror_props: Mapping[str, str],
                        target_props: Mapping[str, str], **overrides: Any) -> MirrorConfig:
        """``mirror_props``/``target_props`` have their prefix stripped (`split_properties`)."""
        kwargs: dict[str, Any] = {}
        for key, raw in mirror_props.items():
            fname = MIRROR_PROPERTIES.get(key)
            if fname is None:
                raise ConfigurationError(f"unknown mirror property mirror.{key}")
            if key in _STRING_PROPERTIES:
                kwargs[fname] = str(raw).strip()
                continue
            try:
                kwargs[fname] = int(str(raw).strip())
            except ValueError as exc:
                raise ConfigurationError(f"mirror.{key} must be an integer, got {raw!r}") from exc
        kwargs.update(overrides)
        try:
            return cls(target=target, target_options=dict(target_props), **kwargs)
        except TypeError as exc:
            raise ConfigurationError(f"invalid mirror setting: {exc}") from exc


_FIELD_TO_PROP = {v: k for k, v in MIRROR_PROPERTIES.items()}


def _positive(value: object, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
