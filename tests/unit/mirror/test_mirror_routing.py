"""Router: topic map and the three partitioning strategies, as tables plus invariants."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.config import Partitioning
from zkconsumer.mirror.routing import (
    Route,
    Router,
    murmur2_partition,
    partition_sort_key,
    preserve_index,
)
from zkconsumer.protocol import default_partition

SOURCE = {"t": ["0-0", "0-1", "2-0", "10-0", "10-1"]}


def router(strategy: Partitioning, n: int = 3, key_regex: bytes | None = None,
           topic_map: dict[str, str] | None = None, hash_fn=murmur2_partition) -> Router:
    return Router(partitioning=strategy, topic_map=topic_map or {},
                  target_partitions=lambda topic: n,
                  source_partitions=lambda topic: SOURCE.get(topic, []),
                  hash_partition=hash_fn,
                  key_regex=re.compile(key_regex) if key_regex else None)


def test_preserve_uses_numeric_broker_partition_order_modulo_target_count() -> None:
    # string order would be 0-0, 0-1, 10-0, 10-1, 2-0; numeric puts 2-0 before 10-0
    assert preserve_index(SOURCE["t"]) == {"0-0": 0, "0-1": 1, "2-0": 2, "10-0": 3, "10-1": 4}
    r = router(Partitioning.PRESERVE, n=3)
    got = {p: r.route("t", p, b"x").partition for p in SOURCE["t"]}
    assert got == {"0-0": 0, "0-1": 1, "2-0": 2, "10-0": 0, "10-1": 1}
    r5 = router(Partitioning.PRESERVE, n=8)
    assert [r5.route("t", p, b"").partition for p in SOURCE["t"]] == [0, 1, 2, 3, 4]


def test_preserve_learns_a_partition_missing_from_the_source_view() -> None:
    r = router(Partitioning.PRESERVE, n=100)
    assert r.route("t", "11-0", b"").partition == 5  # appended in numeric order
    assert r.route("other", "3-0", b"").partition == 0


def test_partition_sort_key_rejects_garbage() -> None:
    assert partition_sort_key("12-3") == (12, 3)
    for bad in ("x", "1-", "a-b", "12"):
        with pytest.raises(MirrorError):
            partition_sort_key(bad)


def test_round_robin_spreads_evenly_per_target_topic() -> None:
    r = router(Partitioning.ROUND_ROBIN, n=4, topic_map={"a": "x", "b": "x"})
    parts = [r.route("a" if i % 2 else "b", "0-0", b"").partition for i in range(40)]
    assert Counter(parts) == {0: 10, 1: 10, 2: 10, 3: 10}
    assert r.route("c", "0-0", b"") == Route("c", 0, None)


def test_hash_with_key_regex_routes_by_key_and_leaves_the_partition_to_the_client() -> None:
    r = router(Partitioning.HASH, key_regex=rb"user=(\w+)")
    assert r.route("t", "0-0", b"ts=1 user=alice x") == Route("t", None, b"alice")


def test_hash_without_a_key_hashes_the_payload_like_kafka_pythons_partitioner() -> None:
    r = router(Partitioning.HASH, n=7, key_regex=rb"user=(\w+)")
    payload = b"no key here"

    class Cluster:
        def topics(self):
            return {"t"}

        def partitions_for_topic(self, topic):
            return set(range(7))

        def available_partitions_for_topic(self, topic):
            return set(range(7))

    expected = DefaultPartitioner().partition("t", payload, payload, None, None, Cluster())
    assert r.route("t", "0-0", payload) == Route("t", expected, None)


def test_hash_for_a_07_target_uses_the_java_hash() -> None:
    r = router(Partitioning.HASH, n=5, hash_fn=default_partition)
    assert r.route("t", "0-0", b"abc").partition == default_partition(b"abc", 5)


def test_topic_map_and_count_cache() -> None:
    calls: list[str] = []

    def count(topic: str) -> int:
        calls.append(topic)
        return 2

    r = Router(partitioning=Partitioning.ROUND_ROBIN, topic_map={"old": "new"},
               target_partitions=count, source_partitions=lambda t: [],
               hash_partition=murmur2_partition)
    assert r.route("old", "0-0", b"").topic == "new"
    r.route("old", "0-0", b"")
    assert calls == ["new"]
    r.forget_counts()
    r.route("old", "0-0", b"")
    assert calls == ["new", "new"]


def test_a_target_topic_without_partitions_is_an_error() -> None:
    with pytest.raises(MirrorError):
        router(Partitioning.ROUND_ROBIN, n=0).route("t", "0-0", b"")


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), min_size=1, max_size=30,
                unique=True),
       st.integers(1, 16))
def test_preserve_maps_each_source_partition_to_one_target_partition(pairs, n) -> None:
    names = [f"{b}-{p}" for b, p in pairs]
    r = Router(partitioning=Partitioning.PRESERVE, topic_map={},
               target_partitions=lambda t: n, source_partitions=lambda t: list(names),
               hash_partition=murmur2_partition)
    first = {name: r.route("t", name, b"a").partition for name in reversed(names)}
    again = {name: r.route("t", name, b"b").partition for name in names}
    assert first == again  # deterministic, independent of payload and order of arrival
    assert all(0 <= p < n for p in first.values())  # type: ignore[operator]
    ordered = sorted(pairs)
    assert all(first[f"{b}-{p}"] == i % n for i, (b, p) in enumerate(ordered))
