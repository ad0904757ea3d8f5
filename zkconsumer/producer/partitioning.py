"""Pure partition logic of the ZooKeeper-aware producer (REFERENCE §4.7).  No I/O here.

Job: turn what ZooKeeper says into the ordered partition list of a topic, and pick an index in
that list for a send.

Invariants
    * A partition list is sorted **numerically by (broker id, partition id)**, like Scala's
      ``SortedSet[Partition]``, so Python and Scala producers index the same list the same
      way and a key lands on the same partition from either.
    * Keyed sends use ``abs(javaHashCode(key)) % len(list)`` (`default_partition`).
    * A topic no live broker has registered is **bootstrapped** as partition 0 of every live
      broker (brokers auto-create the log on first produce and then register it).
    * When brokers register a topic, the list is the **merge** of what they registered and the
      virtual ``(b, 0)`` of live brokers that have not registered it yet, restricted to live
      brokers: test vector ``[(0,0),(1,0)]`` + broker 0 registers 4 partitions ->
      ``[(0,0),(0,1),(0,2),(0,3),(1,0)]`` (ProducerTest.testZKSendToNewTopic).  A broker that
      *did* register contributes exactly what it registered (unlike Scala's plain union, a
      broker restarted with fewer partitions does not keep stale ones).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import java_string_hashcode

__all__ = [
    "BrokerPartition",
    "PartitionChooser",
    "bootstrap_partitions",
    "merge_partitions",
    "partitions_from_counts",
]


class BrokerPartition(NamedTuple):
    """One partition of a topic: the broker and its broker-local partition number.

    ``partition == -1`` (static ``broker.list`` mode) means "the broker picks".
    """

    broker_id: int
    partition: int

    def __str__(self) -> str:
        return f"{self.broker_id}-{self.partition}"


def partitions_from_counts(counts: Mapping[int, int],
                           live: Collection[int] | None = None) -> list[BrokerPartition]:
    """``{broker: n}`` from ``/brokers/topics/T/<b>`` -> sorted ``[(b, 0..n-1)]``.

    With ``live``, brokers not in it are left out (their ephemeral znode may outlive them
    for a moment, or the reverse).
    """
    return [BrokerPartition(b, p) for b in sorted(counts) if live is None or b in live
            for p in range(counts[b])]


def bootstrap_partitions(live_brokers: Iterable[int]) -> list[BrokerPartition]:
    """A topic nobody registered yet: partition 0 of every live broker."""
    return [BrokerPartition(b, 0) for b in sorted(set(live_brokers))]


def merge_partitions(old: Iterable[BrokerPartition], counts: Mapping[int, int],
                     live_brokers: Collection[int]) -> list[BrokerPartition]:
    """The new partition list after a change (see the module docstring).

    ``old`` is the current list, ``counts`` the registrations now in ZooKeeper, and
    ``live_brokers`` the children of ``/brokers/ids``.  If no live broker registered the
    topic the result is the bootstrap list of the live brokers.
    """
    live = set(live_brokers)
    registered = {b for b, n in counts.items() if b in live and n > 0}
    if not registered:
        return bootstrap_partitions(live)
    merged = set(partitions_from_counts({b: counts[b] for b in registered}))
    merged.update(p for p in old if p.broker_id in live and p.broker_id not in registered)
    return sorted(merged)


#: Keys whose hash `PartitionChooser` remembers (the memo is emptied when it is full).
_HASH_CACHE = 1 << 16


def _abs_hash(key: str | bytes) -> int:
    """The ``a`` with ``default_partition(key, n) == a % n`` for every ``n`` (its
    ``abs(javaHashCode)``, 2**31 for ``Integer.MIN_VALUE``)."""
    text = key if isinstance(key, str) else bytes(key).decode("utf-8", "replace")
    return abs(java_string_hashcode(text))


class PartitionChooser:
    """Picks an index into a topic's partition list for one send.

    ``strategy`` (config ``partitioner``):

    * ``hash`` -- keyed: Java hash (Scala DefaultPartitioner); unkeyed: random (Scala's
      ``random.nextInt``).
    * ``round-robin`` -- keyed: Java hash; unkeyed: a per-topic round-robin counter.
    * ``random`` -- every send random, keys ignored for routing.

    ``rng`` is injectable so tests are deterministic.  Thread-safe enough: the counters are
    ``itertools.count`` objects, whose ``next`` is atomic under the GIL.
    """

    def __init__(self, strategy: str = "hash", *,
                 rng: Callable[[int], int] | None = None) -> None:
        if strategy not in ("hash", "random", "round-robin"):
            raise ConfigurationError(f"partitioner must be hash, random or round-robin, "
                                     f"got {strategy!r}")
        self.strategy = strategy
        self._rng: Callable[[int], int] = rng or random.Random().randrange
        self._counters: dict[str, itertools.count[int]] = {}
        self._hashes: dict[str | bytes, int] = {}

    def index(self, topic: str, key: str | bytes | None, n: int) -> int:
        """Index in ``[0, n)`` for a send of ``key`` (None = unkeyed) to a list of ``n``."""
        if n <= 0:
            raise ValueError("no partitions to choose from")
        if key is not None and self.strategy != "random":
            # default_partition(key, n), with the key's hash memoised: hashing a key in
            # Python costs microseconds, and applications send many messages per key.
            h = self._hashes.get(key)
            if h is None:
                if len(self._hashes) >= _HASH_CACHE:
                    self._hashes.clear()
                h = self._hashes[key] = _abs_hash(key)
            return h % n
        if self.strategy == "round-robin":
            counter = self._counters.get(topic)
            if counter is None:
                counter = self._counters.setdefault(topic, itertools.count(self._rng(1 << 16)))
            return next(counter) % n
        return self._rng(n)

    def choose(self, topic: str, key: str | bytes | None,
               partitions: Sequence[BrokerPartition]) -> BrokerPartition:
        return partitions[self.index(topic, key, len(partitions))]
