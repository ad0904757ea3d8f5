"""`DaemonConfig`: everything ``zkconsumer run`` needs, validated before anything starts.

Sources, later ones winning: the 0.7 ``consumer.properties`` file (``--config``), ``--set
key=value`` (0.7 property names), then the dedicated flags (``--zk``, ``--group``).  The
daemon always builds its `ConsumerConfig` with ``auto_ack=False`` and the consumer's own
autocommit off: *it* commits, every ``autocommit.interval.ms``, only offsets the sink
acknowledged, and only after the sink made them durable.  ``autocommit.enable=false`` in the
properties means "commit only on rebalance and shutdown".

Unknown keys: in a properties file they are warned about and ignored (a Scala deployment's
file often carries producer or broker keys; the consumer config logs them); in ``--set`` they
are an error, because a typo on the command line should not be silently dropped.

Invariants (checked in ``__post_init__``; `ConfigurationError` names the flag): exactly one
sink; the format suits the sink (``raw`` only for files, ``binary`` only for exec); dead
letters only with a handler, at most one; every count and timeout positive.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.daemon.formats import EXEC_FORMATS, OUTPUT_FORMATS, VALUE_ENCODINGS
from zkconsumer.errors import ConfigurationError, InvalidTopicError, UsageError
from zkconsumer.properties import load_properties
from zkconsumer.protocol import validate_topic
from zkconsumer.zk.security_config import zk_security_from

__all__ = [
    "CONSUMER_KEYS",
    "DaemonConfig",
    "build_config",
    "parse_set",
    "parse_topic",
]

#: 0.7 consumer property names accepted by ``--set`` (REFERENCE §3.1-3.2, plus the additions
#: `ConsumerConfig.from_properties` understands).
CONSUMER_KEYS: frozenset[str] = frozenset({
    "groupid", "consumerid", "zk.connect", "zk.sessiontimeout.ms", "zk.connectiontimeout.ms",
    "zk.synctime.ms", "socket.timeout.ms", "socket.buffersize", "fetch.size", "max.fetch.size",
    "fetcher.backoff.ms", "backoff.increment.ms", "autocommit.enable", "autocommit.interval.ms",
    "queuedchunks.max", "rebalance.retries.max", "rebalance.backoff.ms", "autooffset.reset",
    "consumer.timeout.ms", "shallowiterator.enable", "num.streams",
})

SINKS = ("output", "exec", "handler")


@dataclass(frozen=True)
class DaemonConfig:
    """Validated settings of one ``zkconsumer run`` process."""

    consumer: ConsumerConfig
    subscription: Subscription
    sink: str
    target: str  # output path, exec command or handler spec
    format: str = "lines"
    value_encoding: str = "utf-8"
    commit_interval: float | None = 10.0  # None: commit on rebalance and shutdown only
    batch_size: int = 1000
    max_in_flight: int = 10000
    max_retries: int = 5
    retry_backoff: float = 0.5
    retry_backoff_max: float = 30.0
    dead_letter: str | None = None
    dead_letter_topic: str | None = None
    restart_backoff: float = 0.5
    restart_backoff_max: float = 30.0
    exec_max_restarts: int = 10  # quick failures in a row tolerated; 0 = unlimited
    shutdown_timeout: float = 10.0
    revoke_timeout: float = 5.0
    startup_timeout: float | None = None  # None: keep trying to reach ZooKeeper forever
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    health_idle_timeout: float = 60.0
    progress: bool = False

    def __post_init__(self) -> None:
        if self.sink not in SINKS:
            raise ConfigurationError(f"sink must be one of {', '.join(SINKS)}, got {self.sink!r}")
        if not self.target:
            raise ConfigurationError(f"--{self.sink}: a value is required")
        if self.sink == "output" and self.format not in OUTPUT_FORMATS:
            raise ConfigurationError(f"--format {self.format} does not apply to --output "
                                     f"(use {'|'.join(OUTPUT_FORMATS)})")
        if self.sink == "exec" and self.format not in EXEC_FORMATS:
            raise ConfigurationError(f"--format {self.format} does not apply to --exec "
                                     f"(use {'|'.join(EXEC_FORMATS)})")
        if self.value_encoding not in VALUE_ENCODINGS:
            raise ConfigurationError(f"--value-encoding must be one of "
                                     f"{'|'.join(VALUE_ENCODINGS)}, got {self.value_encoding!r}")
        if (self.dead_letter or self.dead_letter_topic) and self.sink != "handler":
            raise ConfigurationError("--dead-letter / --dead-letter-topic need --handler")
        if self.dead_letter and self.dead_letter_topic:
            raise ConfigurationError("give --dead-letter or --dead-letter-topic, not both")
        for flag, value in (("--batch-size", self.batch_size),
                            ("--max-in-flight", self.max_in_flight)):
            if value < 1:
                raise ConfigurationError(f"{flag} must be >= 1, got {value}")
        for flag, value in (("--max-retries", self.max_retries),
                            ("--exec-max-restarts", self.exec_max_restarts)):
            if value < 0:
                raise ConfigurationError(f"{flag} must be >= 0, got {value}")
        for flag, fvalue in (("--retry-backoff", self.retry_backoff),
                             ("--retry-backoff-max", self.retry_backoff_max),
                             ("--restart-backoff", self.restart_backoff),
                             ("--restart-backoff-max", self.restart_backoff_max),
                             ("--shutdown-timeout", self.shutdown_timeout),
                             ("--revoke-timeout", self.revoke_timeout),
                             ("--health-idle-timeout", self.health_idle_timeout)):
            if not fvalue > 0:
                raise ConfigurationError(f"{flag} must be > 0, got {fvalue}")
        if self.startup_timeout is not None and not self.startup_timeout > 0:
            raise ConfigurationError(f"--startup-timeout must be > 0, got "
                                     f"{self.startup_timeout}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigurationError(f"--metrics-port must be 0..65535, got {self.metrics_port}")


def parse_topic(arg: str, default_streams: int) -> tuple[str, int]:
    """``"T"`` or ``"T:STREAMS"`` -> (topic, streams); `UsageError` (exit 2) otherwise.

    The name is held to the rules `produce` and `fetch` apply (`validate_topic`: what a 0.7
    broker accepts, ASCII only), plus what a Scala member can read back from our ids znode
    (no ``"`` or ``\\``: Scala writes the JSON unescaped).  Without this, ``..`` failed deep
    inside ZooKeeper code and ``a/b`` or a 300-character name registered a subscription no
    broker can ever serve, and waited forever.
    """
    topic, sep, streams = arg.rpartition(":")
    if not sep:
        topic, n = arg, default_streams
    else:
        try:
            n = int(streams)
        except ValueError as exc:
            raise UsageError(f"--topic {arg!r}: expected TOPIC or TOPIC:STREAMS") from exc
        if not topic or n < 1:
            raise UsageError(f"--topic {arg!r}: expected TOPIC or TOPIC:STREAMS (>= 1)")
    try:
        validate_topic(topic)
    except InvalidTopicError as exc:
        raise UsageError(f"--topic {arg!r}: {exc}") from exc
    if '"' in topic or "\\" in topic:
        raise UsageError(f"--topic {arg!r}: a topic name with a quote or a backslash cannot be "
                         "registered in a consumer group (Scala members could not parse it)")
    return topic, n


def parse_set(items: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict; unknown or malformed keys are errors naming the key."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigurationError(f"--set {item!r}: expected key=value")
        if key not in CONSUMER_KEYS:
            hint = _closest(key)
            raise ConfigurationError(
                f"--set {key}: unknown consumer property" + (f" (did you mean {hint}?)"
                                                             if hint else "")
                + "; see docs/operations.md for the honoured 0.7 properties")
        out[key] = value.strip()
    return out


def _closest(key: str) -> str | None:
    import difflib

    found = difflib.get_close_matches(key, sorted(CONSUMER_KEYS), n=1, cutoff=0.6)
    return found[0] if found else None


def build_config(args: argparse.Namespace) -> DaemonConfig:
    """Turn ``zkconsumer run`` arguments into a validated `DaemonConfig`."""
    props: dict[str, str] = {}
    if args.config:
        props.update(load_properties(args.config))
    props.update(parse_set(args.set or []))
    if "auto.ack" in props:
        raise ConfigurationError("auto.ack: the daemon acknowledges after the sink; remove it")
    overrides: dict[str, object] = {}
    if args.zk:
        overrides["zk_connect"] = args.zk
    if args.group:
        overrides["group_id"] = args.group
    if "zk_connect" not in overrides and "zk.connect" not in props:
        raise ConfigurationError("give --zk HOST:PORT[/chroot] (or zk.connect in --config)")
    if "group_id" not in overrides and "groupid" not in props:
        raise ConfigurationError("give --group GROUP (or groupid in --config)")
    overrides["zk_security"] = zk_security_from(args, props)  # flags over properties
    base = ConsumerConfig.from_properties(props, **overrides)
    consumer = base.replace(auto_ack=False, autocommit_enable=False)
    subscription = _subscription(args, default_streams=args.streams or base.num_streams)

    sink, target = _sink(args)
    fmt = args.format
    if fmt is None:
        fmt = "lines"
    elif sink == "handler":
        raise ConfigurationError("--format applies to --output and --exec only")
    return DaemonConfig(
        consumer=consumer, subscription=subscription, sink=sink, target=target, format=fmt,
        value_encoding=args.value_encoding,
        commit_interval=base.autocommit_interval_ms / 1000.0 if base.autocommit_enable
        else None,
        batch_size=args.batch_size, max_in_flight=args.max_in_flight,
        max_retries=args.max_retries, retry_backoff=args.retry_backoff,
        retry_backoff_max=args.retry_backoff_max, dead_letter=args.dead_letter,
        dead_letter_topic=args.dead_letter_topic, restart_backoff=args.restart_backoff,
        restart_backoff_max=args.restart_backoff_max,
        exec_max_restarts=args.exec_max_restarts, shutdown_timeout=args.shutdown_timeout,
        revoke_timeout=args.revoke_timeout, startup_timeout=args.startup_timeout,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port, health_idle_timeout=args.health_idle_timeout,
        progress=args.progress,
    )


def _subscription(args: argparse.Namespace, default_streams: int) -> Subscription:
    given = [name for name, value in (("--topic", args.topic), ("--whitelist", args.whitelist),
                                      ("--blacklist", args.blacklist)) if value]
    if len(given) != 1:
        raise ConfigurationError("give --topic T[:STREAMS] (repeatable), or --whitelist REGEX, "
                                 "or --blacklist REGEX" + (f" (not {' and '.join(given)})"
                                                           if given else ""))
    if args.topic:
        topics: dict[str, int] = {}
        for arg in args.topic:
            topic, n = parse_topic(arg, default_streams)
            topics[topic] = n
        return Subscription(topics=topics)
    flag = "--whitelist" if args.whitelist else "--blacklist"
    try:
        return Subscription(whitelist=args.whitelist, blacklist=args.blacklist,
                            num_streams=default_streams)
    except ConfigurationError as exc:  # an empty or invalid regex: a bad flag value
        raise UsageError(f"{flag} {args.whitelist or args.blacklist!r}: {exc}") from exc


def _sink(args: argparse.Namespace) -> tuple[str, str]:
    chosen: Mapping[str, str | None] = {"output": args.output, "exec": args.exec,
                                        "handler": args.handler}
    given = [(k, v) for k, v in chosen.items() if v is not None]
    if len(given) != 1:
        raise ConfigurationError("give exactly one sink: --output FILE|-, --exec CMD or "
                                 "--handler module:function")
    return given[0][0], given[0][1] or ""
