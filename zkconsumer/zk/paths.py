"""Every ZooKeeper path and every znode value format of Kafka 0.7.2, as pure functions.

This module is the single place that knows the znode layout (REFERENCE.md section 1)::

    /brokers/ids/<brokerId>                          ephemeral  "<creatorId>:<host>:<port>"
    /brokers/topics/<topic>/<brokerId>               ephemeral  "<partition count>"
    /consumers/<group>/ids/<consumerId>              ephemeral  TopicCount: '{ "t": 2 }' or '*2*regex'
    /consumers/<group>/owners/<topic>/<b>-<p>        ephemeral  "<consumerId>-<thread>"
    /consumers/<group>/offsets/<topic>/<b>-<p>       persistent "<next byte offset>"

plus zkconsumer's own bridge znodes under ``/zkconsumer/bridge`` (end of this module).

Invariants:

* Encoders produce the exact bytes the Scala 0.7.2 code writes (UTF-8, no trailing newline), so a
  Scala member of the same group cannot tell our znodes from its own.
* Parsers accept everything Scala accepts where that is well defined, and raise
  `ZnodeDataError` (carrying the path and the raw bytes) on anything else -- never a bare
  ``ValueError``/``KeyError``, and never a silently wrong value.  A znode with *null* data
  (``None``) is garbage for every value format.
* No I/O, no kazoo, no clock unless a caller leaves ``now_ms`` unset.

Consumer ids, thread ids and the ``TopicCount`` format live in `zkconsumer.zk.topic_count`
and are re-exported here, so every format is importable from this one module.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from zkconsumer.errors import LocalProtocolError, ZnodeDataError, ZooKeeperError
from zkconsumer.zk._codec import DECIMAL, INT_MAX, LONG_MAX, decimal_value, text_value
from zkconsumer.zk.topic_count import (
    TopicCount,
    make_consumer_id,
    normalize_topic_filter,
    parse_topic_count,
    thread_ids,
)

__all__ = [
    "BRIDGE",
    "BRIDGE_TARGETS",
    "BROKER_IDS",
    "BROKER_TOPICS",
    "CONSUMERS",
    "BridgeCheckpoint",
    "BridgeIntent",
    "BrokerInfo",
    "TopicCount",
    "bridge_checkpoint_path",
    "bridge_member_path",
    "bridge_members_path",
    "bridge_partition_path",
    "broker_id_path",
    "check_znode_path",
    "consumer_id_path",
    "consumer_ids_path",
    "encode_offset",
    "encode_partition_count",
    "group_path",
    "make_consumer_id",
    "make_creator_id",
    "normalize_topic_filter",
    "offset_path",
    "offsets_path",
    "offsets_topic_path",
    "owner_path",
    "owners_path",
    "owners_topic_path",
    "parse_bridge_checkpoint",
    "parse_broker_id",
    "parse_broker_info",
    "parse_offset",
    "parse_partition_count",
    "parse_partition_name",
    "parse_topic_count",
    "partition_name",
    "thread_ids",
    "topic_broker_path",
    "topic_path",
]


def check_znode_path(what: str, path: str) -> None:
    """`ZooKeeperError` unless ``path`` is an absolute znode path (no ``.``/``..``/``//``).

    kazoo glues the chroot in front of a path as a plain string, so "x" on chroot "/c" would
    silently address "/cx", outside the chroot: such paths are refused before any request."""
    if not path.startswith("/") or (path != "/" and path.endswith("/")) or "//" in path \
            or any(p in (".", "..") for p in path.split("/")):
        raise ZooKeeperError(f"{what} {path!r}: invalid request: not an absolute znode path")

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONSUMERS = "/consumers"

# --------------------------------------------------------------------------------------------
# Paths (ZkUtils / ZKGroupDirs / ZKGroupTopicDirs).  Components are not validated: Scala does
# not either, and the topic name rules belong to the protocol layer (validate_topic).
# --------------------------------------------------------------------------------------------


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def topic_broker_path(topic: str, broker_id: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/{broker_id}"


def group_path(group: str) -> str:
    return f"{CONSUMERS}/{group}"


def consumer_ids_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/ids"


def consumer_id_path(group: str, consumer_id: str) -> str:
    return f"{CONSUMERS}/{group}/ids/{consumer_id}"


def owners_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/owners"


def owners_topic_path(group: str, topic: str) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}"


def owner_path(group: str, topic: str, partition: str) -> str:
    return f"{CONSUMERS}/{group}/owners/{topic}/{partition}"


def offsets_path(group: str) -> str:
    return f"{CONSUMERS}/{group}/offsets"


def offsets_topic_path(group: str, topic: str) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}"


def offset_path(group: str, topic: str, partition: str) -> str:
    return f"{CONSUMERS}/{group}/offsets/{topic}/{partition}"


# --------------------------------------------------------------------------------------------
# /brokers/ids/<id>  =  "<creatorId>:<host>:<port>"   (cluster/Broker.scala)
# --------------------------------------------------------------------------------------------


def make_creator_id(host: str, now_ms: int | None = None) -> str:
    """The broker's ``creatorId``: ``host + "-" + System.currentTimeMillis``."""
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    return f"{host}-{now_ms}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """One registered broker: the id (znode name) and the three fields of its value."""

    id: int
    creator_id: str
    host: str
    port: int

    @classmethod
    def create(cls, broker_id: int, host: str, port: int, now_ms: int | None = None) -> BrokerInfo:
        """What a broker registers at startup: creator id ``host-<millis>``."""
        return cls(broker_id, make_creator_id(host, now_ms), host, port)

    @property
    def zk_string(self) -> str:
        """``creator:host:port`` (Broker.getZKString).  Not ``host:port``: the docs are wrong."""
        return f"{self.creator_id}:{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def encode(self) -> bytes:
        return self.zk_string.encode("utf-8")


def parse_broker_id(name: str, *, path: str | None = None) -> int:
    """A child name of ``/brokers/ids`` as an int (Scala ``node.toInt``)."""
    where = path if path is not None else f"{BROKER_IDS}/{name}"
    return decimal_value(where, name.encode("utf-8", "replace"), name, "broker id", INT_MAX)


def parse_broker_info(broker_id: int | str, data: bytes | None) -> BrokerInfo:
    """Parse a ``/brokers/ids/<id>`` value.

    Scala splits on every ``:`` and so cannot represent an IPv6 host.  We are lenient: the
    port is after the last ``:``; host and creator id are split at the ``:`` where the creator
    id is ``<host>-<millis>`` (how brokers build it, so an IPv6 host parses too), and
    otherwise at the last ``:`` (e.g. Scala test code uses the bare broker id as creator).
    """
    bid = parse_broker_id(broker_id) if isinstance(broker_id, str) else broker_id
    path = broker_id_path(bid)
    text = text_value(path, data, "broker registration")
    rest, _, port_text = text.rpartition(":")
    creator, _, host = rest.rpartition(":")
    for i, ch in enumerate(rest):
        if ch == ":":
            cand_creator, cand_host = rest[:i], rest[i + 1:]
            millis = cand_creator[len(cand_host) + 1:]
            if (cand_host and cand_creator.startswith(cand_host + "-")
                    and DECIMAL.fullmatch(millis)):
                creator, host = cand_creator, cand_host
                break
    if not creator or not host:
        raise ZnodeDataError("broker registration is not creatorId:host:port", path=path,
                             data=data)
    port = decimal_value(path, data, port_text, "broker port", 65535)
    return BrokerInfo(bid, creator, host, port)


# --------------------------------------------------------------------------------------------
# /brokers/topics/<t>/<b> = "<n>"   and   /consumers/<g>/offsets/<t>/<b-p> = "<offset>"
# --------------------------------------------------------------------------------------------


def encode_partition_count(n: int) -> bytes:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= INT_MAX:
        raise LocalProtocolError(f"partition count must be an int in [0, {INT_MAX}]: {n!r}")
    return str(n).encode("ascii")


def parse_partition_count(path: str, data: bytes | None) -> int:
    """``/brokers/topics/<t>/<b>``: decimal partition count (Scala ``.toInt``)."""
    return decimal_value(path, data, text_value(path, data, "partition count"), "partition count",
                    INT_MAX)


def encode_offset(offset: int) -> bytes:
    """An offsets-znode value: the decimal byte offset of the next message.  Never empty."""
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= LONG_MAX:
        raise LocalProtocolError(f"offset must be an int in [0, 2**63-1]: {offset!r}")
    return str(offset).encode("ascii")


def parse_offset(path: str, data: bytes | None) -> int:
    """An offsets-znode value.  Empty (samsa's ``ensure_path``), negative or non-numeric
    values raise: Scala's ``toLong`` would throw on them too (or, for a negative one, fetch
    from a nonsensical position)."""
    return decimal_value(path, data, text_value(path, data, "offset"), "offset", LONG_MAX)


# --------------------------------------------------------------------------------------------
# Partition names "<brokerId>-<partId>" (cluster/Partition.scala)
# --------------------------------------------------------------------------------------------


def partition_name(broker_id: int, partition: int) -> str:
    return f"{broker_id}-{partition}"


def parse_partition_name(name: str, *, path: str | None = None) -> tuple[int, int]:
    """``"B-P"`` -> ``(B, P)``; exactly two ``-``-separated decimal ints (Partition.parse)."""
    where = path if path is not None else name
    raw = name.encode("utf-8", "replace")
    pieces = name.split("-")
    if len(pieces) != 2:
        raise ZnodeDataError("partition name is not <brokerId>-<partId>", path=where, data=raw)
    broker = decimal_value(where, raw, pieces[0], "partition broker id", INT_MAX)
    part = decimal_value(where, raw, pieces[1], "partition id", INT_MAX)
    return broker, part


# --------------------------------------------------------------------------------------------
# zkconsumer's own znodes: the bridge modern Kafka -> 0.7 (zkconsumer.mirror.bridge)
#
#   /zkconsumer/bridge/<group>/members/<memberId>               ephemeral  "" (a live process)
#   /zkconsumer/bridge/targets/<topic>/<b>-<p>/<group>          persistent BridgeCheckpoint JSON
#
# The checkpoints sit under the *target partition* so that whoever reads a 0.7 partition (the
# forward mirror skipping what a bridge wrote) finds every bridge group writing it with one
# getChildren.  Not a 0.7 path: Scala tools never look under /zkconsumer.
# --------------------------------------------------------------------------------------------

BRIDGE = "/zkconsumer/bridge"
BRIDGE_TARGETS = "/zkconsumer/bridge/targets"
#: Written ranges kept per checkpoint (merged when contiguous, the oldest dropped beyond this).
BRIDGE_MAX_RANGES = 256


def bridge_members_path(group: str) -> str:
    return f"{BRIDGE}/{group}/members"


def bridge_member_path(group: str, member_id: str) -> str:
    return f"{BRIDGE}/{group}/members/{member_id}"


def bridge_partition_path(topic: str, partition: str) -> str:
    """The parent of every bridge group's checkpoint of one 0.7 partition ``"B-P"``."""
    return f"{BRIDGE_TARGETS}/{topic}/{partition}"


def bridge_checkpoint_path(group: str, topic: str, partition: str) -> str:
    return f"{BRIDGE_TARGETS}/{topic}/{partition}/{group}"


@dataclass(frozen=True)
class BridgeIntent:
    """A batch about to be written: ``size`` bytes at byte offset ``start`` by ``owner``,
    covering source positions ``sources`` (``{"topic/partition": next source offset}``)."""

    owner: str
    start: int
    size: int
    sources: dict[str, int]


@dataclass(frozen=True)
class BridgeCheckpoint:
    """What one bridge group wrote into one 0.7 partition (see `zkconsumer.mirror.bridge`).

    ``end``: the byte offset after its last confirmed batch (-1: nothing yet);
    ``sources``: per source partition the next source offset whose record routed here is not
    yet written; ``ranges``: ``[start, end)`` byte ranges it wrote (merged, newest last);
    ``shared``: another producer writes this partition too (no exactly-once, see the docs);
    ``intent``: the batch in flight, or None.
    """

    end: int = -1
    sources: dict[str, int] = field(default_factory=dict)
    ranges: tuple[tuple[int, int], ...] = ()
    shared: bool = False
    intent: BridgeIntent | None = None

    def encode(self) -> bytes:
        doc: dict[str, object] = {"end": self.end, "sources": self.sources,
                                  "ranges": [list(r) for r in self.ranges],
                                  "shared": self.shared}
        if self.intent is not None:
            i = self.intent
            doc["intent"] = {"owner": i.owner, "start": i.start, "size": i.size,
                             "sources": i.sources}
        return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()

    def landed(self, intent: BridgeIntent) -> BridgeCheckpoint:
        """This checkpoint after ``intent`` was confirmed (its range added, merged)."""
        ranges = list(self.ranges)
        stop = intent.start + intent.size
        if ranges and ranges[-1][1] == intent.start:
            ranges[-1] = (ranges[-1][0], stop)
        elif intent.size:
            ranges.append((intent.start, stop))
        return BridgeCheckpoint(stop, {**self.sources, **intent.sources},
                                tuple(ranges[-BRIDGE_MAX_RANGES:]), self.shared, None)

    def covers(self, offset: int) -> bool:
        """Whether 0.7 byte ``offset`` is inside what this group wrote or is writing."""
        if self.intent is not None and \
                self.intent.start <= offset < self.intent.start + self.intent.size:
            return True
        return any(s <= offset < e for s, e in self.ranges)


def parse_bridge_checkpoint(path: str, data: bytes | None) -> BridgeCheckpoint:
    """A bridge checkpoint znode; garbage raises `ZnodeDataError`."""
    if data is None:
        raise ZnodeDataError("bridge checkpoint is null", path=path, data=data)
    try:
        raw = json.loads(data)
        intent = raw.get("intent")
        return BridgeCheckpoint(
            int(raw["end"]), {str(k): int(v) for k, v in raw.get("sources", {}).items()},
            tuple((int(s), int(e)) for s, e in raw.get("ranges", [])),
            bool(raw.get("shared", False)),
            None if intent is None else BridgeIntent(
                str(intent["owner"]), int(intent["start"]), int(intent["size"]),
                {str(k): int(v) for k, v in intent.get("sources", {}).items()}))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ZnodeDataError(f"bridge checkpoint is not valid: {exc}", path=path,
                             data=data) from exc
