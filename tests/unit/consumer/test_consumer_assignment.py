"""The rebalance decision: reference vectors, string-sort traps and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.consumer.assignment import assign, assign_topics, thread_range
from zkconsumer.errors import ConsumerError

C1 = "group1_consumer1-0"
C2 = "group1_consumer2-0"


def test_reference_vector_zkloadbalancetest() -> None:
    # [K072] test/unit/kafka/zk/ZKLoadBalanceTest.scala
    parts = ["200-0", "200-1", "300-0", "300-1", "400-0"]
    threads = [C1, C2]
    assert assign(parts, threads, [C1]) == {"200-0": C1, "200-1": C1, "300-0": C1}
    assert assign(parts, threads, [C2]) == {"300-1": C2, "400-0": C2}
    # broker 400 deleted
    parts = ["200-0", "200-1", "300-0", "300-1"]
    assert assign(parts, threads, [C1]) == {"200-0": C1, "200-1": C1}
    assert assign(parts, threads, [C2]) == {"300-0": C2, "300-1": C2}


def test_partitions_sort_as_strings_not_numbers() -> None:
    # "10-0" < "2-0" as Java strings: broker 10's partition goes to the FIRST thread.
    parts = ["2-0", "10-0"]
    assert assign(parts, ["g_a-0", "g_b-0"], ["g_a-0"]) == {"10-0": "g_a-0"}
    assert assign(parts, ["g_a-0", "g_b-0"], ["g_b-0"]) == {"2-0": "g_b-0"}


def test_threads_sort_as_strings_not_numbers() -> None:
    threads = [f"g_a-{i}" for i in range(11)]  # g_a-0, g_a-1, g_a-10, g_a-2, ...
    parts = [f"0-{i}" for i in range(11)]
    got = assign(parts, threads, ["g_a-10", "g_a-2"])
    # sorted parts: 0-0, 0-1, 0-10, 0-2, ...; sorted threads: g_a-0, g_a-1, g_a-10, g_a-2
    assert got == {"0-10": "g_a-10", "0-2": "g_a-2"}


def test_threads_sort_in_java_utf16_order() -> None:
    # Java compares UTF-16 units: U+1F600 is the pair D83D DE00, so it sorts BEFORE U+FFFD,
    # although its code point is larger.  A group named with both would otherwise split.
    astral, bmp = "g_\U0001F600-0", "g_\uFFFD-0"
    assert assign(["0-0", "0-1"], [bmp, astral], [astral]) == {"0-0": astral}
    assert assign(["0-0", "0-1"], [bmp, astral], [bmp]) == {"0-1": bmp}


def test_extras_go_to_earlier_threads() -> None:
    parts = [f"1-{i}" for i in range(5)]
    threads = ["a-0", "b-0", "c-0"]
    sizes = [len(assign(parts, threads, [t])) for t in threads]
    assert sizes == [2, 2, 1]
    assert thread_range(0, 5, 3) == range(0, 2)
    assert thread_range(2, 5, 3) == range(4, 5)


def test_more_threads_than_partitions() -> None:
    assert assign(["1-0"], ["a-0", "b-0"], ["b-0"]) == {}
    assert assign([], ["a-0"], ["a-0"]) == {}


def test_unknown_thread_is_an_error() -> None:
    with pytest.raises(ConsumerError):
        assign(["1-0"], ["a-0"], ["b-0"])


def test_assign_topics() -> None:
    got = assign_topics({"t": ["1-0", "1-1"], "u": ["1-0"]},
                        {"t": ["a-0", "b-0"], "u": ["a-0"], "v": ["a-0"]},
                        {"t": ["a-0"], "u": ["a-0"], "v": ["a-0"]})
    assert got == {"t": {"1-0": "a-0"}, "u": {"1-0": "a-0"}, "v": {}}


_names = st.text(alphabet="ab_-0123456789", min_size=1, max_size=6)


@given(parts=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 12)), max_size=60),
       threads=st.lists(_names, min_size=1, max_size=12, unique=True),
       shuffle_seed=st.randoms(use_true_random=False))
def test_invariants(parts: list[tuple[int, int]], threads: list[str],
                    shuffle_seed: object) -> None:
    names = sorted({f"{b}-{p}" for b, p in parts})
    combined: dict[str, str] = {}
    per_thread: dict[str, int] = {}
    for t in threads:
        mine = assign(names, threads, [t])
        per_thread[t] = len(mine)
        for p, owner in mine.items():
            assert owner == t
            assert p not in combined, "partition owned twice"
            combined[p] = owner
    # every partition owned exactly once
    assert sorted(combined) == names
    # sizes differ by at most one, earlier (string-sorted) threads get the extras
    ordered = [per_thread[t] for t in sorted(threads)]
    assert max(ordered) - min(ordered) <= 1
    assert ordered == sorted(ordered, reverse=True)
    # independent of input order and duplicates
    shuffled_parts = list(names) + names[:3]
    shuffled_threads = list(threads)
    shuffle_seed.shuffle(shuffled_parts)  # type: ignore[attr-defined]
    shuffle_seed.shuffle(shuffled_threads)  # type: ignore[attr-defined]
    again = {}
    for t in threads:
        again.update(assign(shuffled_parts, shuffled_threads, [t]))
    assert again == combined
    # computing for all my threads at once equals the union
    assert assign(names, threads, threads) == combined
