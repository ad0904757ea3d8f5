"""Parse and validate the ``kafka07`` data-source options (pure; no pyspark, no I/O).

Spark hands a data source its options as a case-insensitive dict of **strings** (PYSPARK.md §6).
Everything is parsed here into frozen dataclasses, up front, so a bad value fails at
``.load()`` (reads) or ``.save()`` (writes) with a `ConfigurationError` naming the option --
not later in an executor with a bare Python traceback.

Offsets are byte offsets, keyed like ZooKeeper keys them: ``{"topic": {"<broker>-<part>": n}}``
(str keys, so they survive Spark's JSON checkpoint unchanged).  In an offsets JSON the values
``-2`` and ``-1`` mean earliest and latest, as in Spark's Kafka source.  A log-directory source
has no broker ids unless ``brokerId`` is given, and then keys are just ``"<part>"``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import Compression, validate_topic
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.security_config import is_security_key, zk_security_from

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "Offsets",
    "ReadOptions",
    "WriteOptions",
    "parse_brokers",
    "parse_offsets_json",
    "parse_read_options",
    "parse_write_options",
    "partition_key",
]

Offsets = dict[str, dict[str, int]]
#: Sentinels inside an offsets JSON (Spark Kafka source convention).
EARLIEST = -2
LATEST = -1

DEFAULT_MAX_SPLIT_BYTES = 128 * 1024 * 1024
_ZK_KEYS = ("zookeeper.connect", "zk.connect")
_PART_KEY = re.compile(r"^(?:(\d+)-)?(\d+)$")


def partition_key(broker_id: int | None, partition: int) -> str:
    """``"B-P"`` as ZooKeeper names a partition; ``"P"`` when the broker is unknown."""
    return str(partition) if broker_id is None else f"{broker_id}-{partition}"


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: ``earliest``, ``latest``, ``group:<name>`` or explicit JSON."""

    kind: Literal["earliest", "latest", "group", "json"]
    group: str | None = None
    offsets: Offsets = field(default_factory=dict)

    def describe(self) -> str:
        if self.kind == "group":
            return f"group:{self.group}"
        if self.kind == "json":
            return json.dumps(self.offsets, sort_keys=True)
        return self.kind


@dataclass(frozen=True)
class ReadOptions:
    """Validated options of a read (batch or streaming)."""

    source: Literal["zookeeper", "brokers", "logdir"]
    zk_connect: str | None = None
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    log_dir: str | None = None
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    max_split_bytes: int = DEFAULT_MAX_SPLIT_BYTES
    fetch_size: int = 1024 * 1024
    max_fetch_size: int = 64 * 1024 * 1024
    socket_timeout: float = 30.0
    num_partitions: int = 1
    fail_on_data_loss: bool = True
    broker_id: int | None = None
    skip_corrupt: bool = False
    max_bytes_per_trigger: int | None = None
    commit_to_group: str | None = None
    # zk.tls.*, zk.sasl.user, zk.digest.user, zk.password.file, zk.acl: file paths and user
    # names only -- an executor reads the password from zk.password.file or its environment
    zk_security: ZkSecurity = field(default_factory=ZkSecurity)

    def topic_matches(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None  # Java String.matches
        return topic in self.topics


@dataclass(frozen=True)
class WriteOptions:
    """Validated options of ``df.write.format("kafka07")``."""

    zk_connect: str | None = None
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    topic: str | None = None
    compression: Compression = Compression.NONE
    batch_size: int = 200
    zk_security: ZkSecurity = field(default_factory=ZkSecurity)
    create_topic: bool = False  # createTopic: spread each topic over every live broker first
    validate_first: bool = False  # validateFirst: check a task's rows before sending any


def parse_brokers(text: str, option: str = "brokers") -> dict[int, tuple[str, int]]:
    """``"0:host:port,1:host:port"`` -> ``{0: ("host", port), ...}``."""
    brokers: dict[int, tuple[str, int]] = {}
    for item in (x.strip() for x in text.split(",")):
        parts = item.split(":")
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].isdigit() or not parts[1]:
            raise ConfigurationError(
                f"option {option}: {item!r} is not id:host:port (e.g. 0:127.0.0.1:9092)")
        brokers[int(parts[0])] = (parts[1], int(parts[2]))
    if not brokers:
        raise ConfigurationError(f"option {option} is empty")
    return brokers


def parse_offsets_json(text: str, option: str, *, allow_plain_partitions: bool = False) -> Offsets:
    """Parse ``{"topic": {"B-P": offset}}``; offsets >= 0, or -2 / -1 (earliest / latest)."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"option {option}: not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigurationError(f'option {option}: expected {{"topic": {{"B-P": offset}}}}')
    out: Offsets = {}
    for topic, parts in raw.items():
        if not isinstance(parts, dict):
            raise ConfigurationError(f"option {option}: topic {topic!r} must map to an object")
        out[topic] = {}
        for key, value in parts.items():
            match = _PART_KEY.match(key)
            if not match or (match.group(1) is None and not allow_plain_partitions):
                raise ConfigurationError(
                    f"option {option}: {topic}/{key!r} is not a partition name like '0-3'")
            if isinstance(value, bool) or not isinstance(value, int) or value < EARLIEST:
                raise ConfigurationError(
                    f"option {option}: {topic}/{key} = {value!r} is not a byte offset "
                    f"(an integer >= 0, or -2 earliest / -1 latest)")
            out[topic][key] = value
    return out


class _CaseInsensitive(dict[str, str]):
    """Lookups ignore case, as Spark's own CaseInsensitiveDict does (plain dicts in tests)."""

    def __init__(self, opts: Mapping[str, str]) -> None:
        super().__init__((k.lower(), v) for k, v in opts.items())

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(key.lower(), default)


def _int(opts: Mapping[str, str], key: str, default: int, minimum: int = 1) -> int:
    text = opts.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError as exc:
        raise ConfigurationError(f"option {key}: {text!r} is not an integer") from exc
    if value < minimum:
        raise ConfigurationError(f"option {key}: must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], key: str, default: bool) -> bool:
    text = opts.get(key)
    if text is None:
        return default
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise ConfigurationError(f"option {key}: {text!r} is not true/false")


def _zk(opts: Mapping[str, str]) -> str | None:
    for key in _ZK_KEYS:
        value = opts.get(key)
        if value:
            return value
    return None


def _start_spec(text: str | None, plain: bool) -> OffsetSpec:
    if text is None or text == "earliest":
        return OffsetSpec("earliest")
    if text == "latest":
        return OffsetSpec("latest")
    if text.startswith("group:"):
        group = text[len("group:"):]
        if not group or "/" in group:
            raise ConfigurationError(f"option startingOffsets: invalid group name in {text!r}")
        return OffsetSpec("group", group=group)
    if text.lstrip().startswith("{"):
        return OffsetSpec("json", offsets=parse_offsets_json(
            text, "startingOffsets", allow_plain_partitions=plain))
    raise ConfigurationError(
        f"option startingOffsets: {text!r} is not earliest, latest, group:<name> or JSON")


def _end_spec(text: str | None, plain: bool) -> OffsetSpec:
    if text is None or text == "latest":
        return OffsetSpec("latest")
    if text.lstrip().startswith("{"):
        return OffsetSpec("json", offsets=parse_offsets_json(
            text, "endingOffsets", allow_plain_partitions=plain))
    raise ConfigurationError(f"option endingOffsets: {text!r} is not latest or JSON")


def _topics(opts: Mapping[str, str], required: bool) -> tuple[tuple[str, ...], str | None]:
    topic, pattern = opts.get("topic"), opts.get("pattern")
    if topic and pattern:
        raise ConfigurationError("options topic and pattern are mutually exclusive")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(f"option pattern: invalid regex {pattern!r}: {exc}") from exc
        return (), pattern
    names = tuple(t.strip() for t in (topic or "").split(",") if t.strip())
    for name in names:
        try:
            validate_topic(name)
        except ValueError as exc:
            raise ConfigurationError(f"option topic: {exc}") from exc
    if required and not names:
        raise ConfigurationError("option topic (a name or comma list) or pattern is required")
    return names, None


def parse_read_options(opts: Mapping[str, str]) -> ReadOptions:
    """Validate read options (see docs/spark.md for the table)."""
    opts = _CaseInsensitive(opts)
    zk, brokers_text = _zk(opts), opts.get("brokers")
    log_dir = opts.get("logDir") or opts.get("path")
    given = [name for name, v in (("zookeeper.connect", zk), ("brokers", brokers_text),
                                  ("logDir", log_dir)) if v]
    if len(given) != 1:
        raise ConfigurationError(
            "exactly one of the options zookeeper.connect, brokers or logDir (or a load() "
            f"path) is required, got {given or 'none'}")
    source: Literal["zookeeper", "brokers", "logdir"] = (
        "zookeeper" if zk else "brokers" if brokers_text else "logdir")
    plain = source == "logdir"
    topics, pattern = _topics(opts, required=source != "logdir")
    if pattern is not None and source == "brokers":
        raise ConfigurationError("option pattern needs zookeeper.connect (or a log directory): "
                                 "a broker list cannot enumerate topics; give topic instead")
    broker_id = opts.get("brokerId")
    max_bytes = opts.get("maxBytesPerTrigger")
    group = opts.get("commitToGroup")
    if group is not None and (not group or "/" in group):
        raise ConfigurationError(f"option commitToGroup: invalid group name {group!r}")
    if group is not None and source != "zookeeper":
        raise ConfigurationError("option commitToGroup needs zookeeper.connect")
    starting = _start_spec(opts.get("startingOffsets"), plain)
    if starting.kind == "group" and source != "zookeeper":
        raise ConfigurationError("option startingOffsets=group:<name> needs zookeeper.connect")
    fetch_size = _int(opts, "fetchSize", 1024 * 1024)
    return ReadOptions(
        source=source,
        zk_connect=zk,
        brokers=parse_brokers(brokers_text) if brokers_text else {},
        log_dir=log_dir,
        topics=topics,
        pattern=pattern,
        starting=starting,
        ending=_end_spec(opts.get("endingOffsets"), plain),
        max_split_bytes=_int(opts, "maxSplitBytes", DEFAULT_MAX_SPLIT_BYTES),
        fetch_size=fetch_size,
        max_fetch_size=_int(opts, "maxFetchSize", max(64 * 1024 * 1024, fetch_size),
                            minimum=fetch_size),
        socket_timeout=_int(opts, "socketTimeoutMs", 30000) / 1000.0,
        num_partitions=_int(opts, "numPartitions", 1),
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        broker_id=None if broker_id is None else _int(opts, "brokerId", 0, minimum=0),
        skip_corrupt=_bool(opts, "skipCorrupt", False),
        max_bytes_per_trigger=None if max_bytes is None else _int(opts, "maxBytesPerTrigger", 0),
        commit_to_group=group,
        zk_security=_zk_security(opts),
    )


def parse_write_options(opts: Mapping[str, str]) -> WriteOptions:
    """Validate write options: a cluster (zookeeper.connect or brokers), topic, compression."""
    opts = _CaseInsensitive(opts)
    zk, brokers_text = _zk(opts), opts.get("brokers")
    if bool(zk) == bool(brokers_text):
        raise ConfigurationError(
            "writing needs exactly one of the options zookeeper.connect or brokers")
    topics, pattern = _topics(opts, required=False)
    if pattern or len(topics) > 1:
        raise ConfigurationError("option topic: give one topic to write to (or a topic column)")
    codec = (opts.get("compression") or "none").lower()
    codecs = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY}
    if codec not in codecs:
        raise ConfigurationError(f"option compression: {codec!r} is not none, gzip or snappy")
    create_topic = _bool(opts, "createTopic", False)
    if create_topic and not zk:
        raise ConfigurationError("option createTopic needs zookeeper.connect (with brokers the "
                                 "writer routes over every listed broker already)")
    return WriteOptions(
        zk_connect=zk,
        brokers=parse_brokers(brokers_text) if brokers_text else {},
        topic=topics[0] if topics else None,
        compression=codecs[codec],
        batch_size=_int(opts, "batchSize", 200),
        zk_security=_zk_security(opts),
        create_topic=create_topic,
        validate_first=_bool(opts, "validateFirst", False),
    )


def _zk_security(opts: Mapping[str, str]) -> ZkSecurity:
    return zk_security_from(None, {k: v for k, v in opts.items() if is_security_key(k)})
