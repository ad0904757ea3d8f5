"""Pure partition logic: numeric order, bootstrap/merge (REFERENCE §4.7), key routing."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.producer.partitioning import (
    BrokerPartition as BP,
)
from zkconsumer.producer.partitioning import (
    PartitionChooser,
    bootstrap_partitions,
    merge_partitions,
    partitions_from_counts,
)
from zkconsumer.protocol import default_partition


def test_lists_sort_numerically_not_as_strings() -> None:
    parts = partitions_from_counts({10: 1, 2: 2, 1: 1})
    assert parts == [BP(1, 0), BP(2, 0), BP(2, 1), BP(10, 0)]
    assert [str(p) for p in parts] == ["1-0", "2-0", "2-1", "10-0"]


def test_counts_of_dead_brokers_are_left_out() -> None:
    assert partitions_from_counts({0: 2, 1: 1}, live={1}) == [BP(1, 0)]


def test_bootstrap_is_partition_zero_of_every_live_broker() -> None:
    assert bootstrap_partitions([3, 0, 1]) == [BP(0, 0), BP(1, 0), BP(3, 0)]
    assert bootstrap_partitions([]) == []


def test_merge_reference_vector() -> None:
    # ProducerTest.testZKSendToNewTopic: [(0,0),(1,0)], then broker 0 registers 4 partitions.
    old = bootstrap_partitions([0, 1])
    assert old == [BP(0, 0), BP(1, 0)]
    merged = merge_partitions(old, {0: 4}, {0, 1})
    assert merged == [BP(0, 0), BP(0, 1), BP(0, 2), BP(0, 3), BP(1, 0)]
    # broker 1 registers 2 partitions: its virtual (1,0) becomes real and (1,1) appears
    assert merge_partitions(merged, {0: 4, 1: 2}, {0, 1}) == [
        BP(0, 0), BP(0, 1), BP(0, 2), BP(0, 3), BP(1, 0), BP(1, 1)]


def test_merge_drops_dead_brokers_and_falls_back_to_bootstrap() -> None:
    full = [BP(0, 0), BP(0, 1), BP(1, 0)]
    assert merge_partitions(full, {0: 2}, {0}) == [BP(0, 0), BP(0, 1)]
    # nobody alive registered it: bootstrap over the live brokers (new ones included)
    assert merge_partitions(full, {0: 2}, {1, 2}) == [BP(1, 0), BP(2, 0)]
    assert merge_partitions(full, {}, set()) == []


def test_a_registered_broker_contributes_exactly_what_it_registered() -> None:
    # broker 0 restarted with 2 partitions instead of 4: the stale (0,2),(0,3) must go
    old = [BP(0, 0), BP(0, 1), BP(0, 2), BP(0, 3)]
    assert merge_partitions(old, {0: 2}, {0}) == [BP(0, 0), BP(0, 1)]


@given(st.dictionaries(st.integers(0, 20), st.integers(0, 5)),
       st.sets(st.integers(0, 20)), st.lists(st.tuples(st.integers(0, 20), st.integers(0, 5))))
def test_merge_invariants(counts: dict[int, int], live: set[int],
                          old_raw: list[tuple[int, int]]) -> None:
    old = sorted({BP(b, p) for b, p in old_raw})
    merged = merge_partitions(old, counts, live)
    assert merged == sorted(set(merged))                       # sorted, no duplicates
    assert all(p.broker_id in live for p in merged)            # only live brokers
    registered = {b for b, n in counts.items() if b in live and n > 0}
    for b in registered:                                       # registrations are exact
        assert [p.partition for p in merged if p.broker_id == b] == list(range(counts[b]))
    if live and not registered:
        assert merged == bootstrap_partitions(live)


# Computed with Java 17: Math.abs(key.hashCode()) % n (the DefaultPartitioner).
@pytest.mark.parametrize("key,n,index", [
    ("", 4, 0),                      # hashCode 0
    ("a", 4, 1),                     # 97
    ("hello", 7, 0),                 # 99162322
    ("user-42", 10, 6),              # -147182656
    ("\u00e9t\u00e9", 5, 2),          # 227742 (non-ASCII)
    ("\U0001f600key", 6, 0),         # 1276932636 (surrogate pair = two UTF-16 units)
    ("polygenelubricants", 3, 2),    # Integer.MIN_VALUE: Java gives -2 and Scala throws;
])                                   # we use 2**31 % 3
def test_keys_route_with_the_java_hash(key: str, n: int, index: int) -> None:
    chooser = PartitionChooser("hash")
    assert chooser.index("t", key, n) == index
    assert PartitionChooser("round-robin").index("t", key, n) == index
    parts = partitions_from_counts({0: 2, 1: n - 2})
    assert chooser.choose("t", key, parts) == parts[index]


def test_unkeyed_round_robin_cycles_per_topic() -> None:
    chooser = PartitionChooser("round-robin", rng=lambda n: 0)
    assert [chooser.index("a", None, 3) for _ in range(5)] == [0, 1, 2, 0, 1]
    assert chooser.index("b", None, 3) == 0


def test_unkeyed_hash_is_random_and_random_ignores_keys() -> None:
    draws = iter([2, 0, 1])
    chooser = PartitionChooser("hash", rng=lambda n: next(draws))
    assert [chooser.index("t", None, 3) for _ in range(3)] == [2, 0, 1]
    spread = Counter(PartitionChooser("random").index("t", "same-key", 4) for _ in range(400))
    assert len(spread) == 4


def test_bad_strategy_and_empty_list() -> None:
    with pytest.raises(ValueError):
        PartitionChooser("sticky")
    with pytest.raises(ValueError):
        PartitionChooser().index("t", None, 0)


@given(st.lists(st.one_of(st.text(max_size=12), st.binary(max_size=12)), min_size=1,
                max_size=20), st.integers(1, 40))
def test_the_memoised_key_hash_routes_exactly_like_default_partition(
        keys: list[str | bytes], n: int) -> None:
    chooser = PartitionChooser("hash")
    for key in keys + keys + ["polygenelubricants"]:  # second pass: from the memo
        assert chooser.index("t", key, n) == default_partition(key, n)
