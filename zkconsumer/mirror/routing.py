"""Where a mirrored message goes: target topic, target partition, key.  Pure; no I/O.

A `Router` turns (source topic, source partition ``"B-P"``, payload) into a `Route`.  It needs
two facts it cannot know by itself, injected as callables so this module stays testable with
plain tables:

* ``target_partitions(topic) -> n`` -- how many partitions the *target* topic has;
* ``source_partitions(topic) -> ["B-P", ...]`` -- every partition of the *source* topic in the
  0.7 cluster (not only the ones this member owns), for ``preserve``.

Strategies (docs/mirror.md has the operator's view):

* ``preserve`` -- the source partitions sorted **numerically by (broker id, partition id)** (the
  order the 0.7 producer uses, REFERENCE §4.7; the consumer's string order would put ``10-0``
  before ``2-0`` and make the mapping depend on how many digits broker ids have).  Source
  index ``i`` goes to target partition ``i % n``.  One source partition always lands in one
  target partition, so per-partition order survives, whatever ``n`` is.
* ``hash`` -- with ``--key-regex``, group 1 of the first match is the message *key*; the route
  carries the key and no partition, so the target client's own key partitioner decides
  (librdkafka's ``murmur2_random``, identical to the Java client's, so modern consumers can rely on
  key -> partition; on a 0.7 target the 0.7 producer's Java ``hashCode``).  Without a key (no
  regex, or it does not match) the payload is hashed with that same target hash function and
  the route carries an explicit partition: the payload is not duplicated into a key.
* ``round-robin`` -- a counter per target topic; partition ``c % n``.  Even, deterministic,
  no ordering guarantee.

Invariants: a route's partition is ``None`` (key-routed) or in ``[0, n)``; the mapping of a
known source partition never changes while the source partition list is unchanged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.config import Partitioning

__all__ = ["Route", "Router", "murmur2_partition", "partition_sort_key", "preserve_index"]

log = logging.getLogger(__name__)


class Route(NamedTuple):
    topic: str
    partition: int | None  # index into the target topic's partitions, or None = by key
    key: bytes | None


def partition_sort_key(name: str) -> tuple[int, int]:
    """``"B-P"`` -> ``(B, P)`` for numeric ordering; raises `MirrorError` on garbage."""
    broker, sep, part = name.partition("-")
    try:
        if not sep:
            raise ValueError(name)
        return int(broker), int(part)
    except ValueError as exc:
        raise MirrorError(f"not a 0.7 partition name (broker-partition): {name!r}") from exc


def preserve_index(partitions: Sequence[str]) -> dict[str, int]:
    """``{"B-P": i}`` with ``i`` the position in numeric (broker, partition) order."""
    ordered = sorted(set(partitions), key=partition_sort_key)
    return {name: i for i, name in enumerate(ordered)}


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``) as a signed int32.

    The Java client's default partitioner and librdkafka's ``murmur2_random`` partitioner
    (which the mirror configures) both hash keys with it, so a payload hashed here lands
    where a keyed record with that key would.
    """
    m = 0x5BD1E995
    mask = 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = data[i] | data[i + 1] << 8 | data[i + 2] << 16 | data[i + 3] << 24
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(data: bytes, n: int) -> int:
    """The Java client's (and librdkafka ``murmur2_random``'s) partition for key ``data``."""
    return (murmur2(data) & 0x7FFFFFFF) % n


class Router:
    """Applies the topic map and one partitioning strategy (see module docstring)."""

    def __init__(self, *, partitioning: Partitioning, topic_map: Mapping[str, str],
                 target_partitions: Callable[[str], int],
                 source_partitions: Callable[[str], Sequence[str]],
                 hash_partition: Callable[[bytes, int], int],
                 key_regex: re.Pattern[bytes] | None = None) -> None:
        self._partitioning = Partitioning(partitioning)
        self._topic_map = dict(topic_map)
        self._target_partitions = target_partitions
        self._source_partitions = source_partitions
        self._hash = hash_partition
        self._key_regex = key_regex
        self._counts: dict[str, int] = {}
        self._indexes: dict[str, dict[str, int]] = {}
        self._rr: dict[str, int] = {}

    def target_topic(self, source_topic: str) -> str:
        return self._topic_map.get(source_topic, source_topic)

    def target_count(self, target_topic: str) -> int:
        """Partition count of a target topic, asked once and cached (see `forget_counts`)."""
        n = self._counts.get(target_topic)
        if n is None:
            n = int(self._target_partitions(target_topic))
            if n <= 0:
                raise MirrorError(f"target topic {target_topic!r} has no partitions")
            self._counts[target_topic] = n
        return n

    def forget_counts(self) -> None:
        """Drop cached target partition counts (after the target was rebuilt)."""
        self._counts.clear()

    def route(self, topic: str, partition: str, value: bytes) -> Route:
        target = self.target_topic(topic)
        # Asked even for key-routed messages: a missing target topic must be an error (or be
        # created by --create-topics) *before* the client's metadata request, which some
        # brokers answer by auto-creating the topic with their default partition count.
        n = self.target_count(target)
        strategy = self._partitioning
        if strategy is Partitioning.PRESERVE:
            return Route(target, self._preserve(topic, partition) % n, None)
        if strategy is Partitioning.ROUND_ROBIN:
            c = self._rr.get(target, 0)
            self._rr[target] = c + 1
            return Route(target, c % n, None)
        if self._key_regex is not None:
            m = self._key_regex.search(value)
            if m is not None and m.group(1) is not None:
                return Route(target, None, m.group(1))
        return Route(target, self._hash(value, n), None)

    def _preserve(self, topic: str, partition: str) -> int:
        index = self._indexes.get(topic)
        if index is None or partition not in index:
            fresh = preserve_index([*self._source_partitions(topic), partition])
            if index is not None:
                moved = sorted(p for p, i in index.items() if fresh.get(p) != i)
                if moved:
                    log.warning("source topic %s gained partitions; preserve mapping of %s "
                                "changed (per-partition order holds from here on)",
                                topic, ", ".join(moved))
            self._indexes[topic] = index = fresh
        return index[partition]
