"""AckTracker: the in-order rule that decides what the mirror may commit."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zkconsumer.mirror.tracker import AckTracker, Entry, EntryState

K = ("t", "0-0")


def add_n(tracker: AckTracker[str, None], n: int, key: object = K) -> list[Entry[str, None]]:
    return [tracker.add(key, f"m{i}", None, 10) for i in range(n)]


def test_only_the_contiguous_acknowledged_prefix_is_drained() -> None:
    t: AckTracker[str, None] = AckTracker(100)
    e = add_n(t, 4)
    t.complete(e[1], 0)
    t.complete(e[2], 0)
    assert t.drain_acked() == {}  # m0 still pending: nothing committable
    t.complete(e[0], 0)
    d = t.drain_acked()[K]
    assert (d.message, d.count, d.size) == ("m2", 3, 30)
    assert t.in_flight == 1
    t.complete(e[3], 0)
    assert t.drain_acked()[K].message == "m3"
    assert t.in_flight == 0 and t.keys() == []


def test_partitions_are_independent() -> None:
    t: AckTracker[str, None] = AckTracker(100)
    a = add_n(t, 2, ("t", "0-0"))
    b = add_n(t, 2, ("t", "1-0"))
    t.complete(b[0], 0)
    t.complete(b[1], 0)
    out = t.drain_acked()
    assert set(out) == {("t", "1-0")}
    assert out[("t", "1-0")].message == "m1"
    t.complete(a[0], 0)
    assert t.drain_acked([("t", "1-0")]) == {}  # only the keys asked for
    assert t.drain_acked([("t", "0-0")])[("t", "0-0")].message == "m0"


def test_window_counts_undrained_entries_and_wakes_waiters() -> None:
    t: AckTracker[str, None] = AckTracker(2)
    e = add_n(t, 2)
    assert t.room() == 0
    assert t.wait_for_room(0.01) is False
    t.complete(e[0], 0)
    assert t.room() == 0  # acknowledged but not drained still occupies the window
    woke = threading.Event()

    def waiter() -> None:
        if t.wait_for_room(5):
            woke.set()

    th = threading.Thread(target=waiter)
    th.start()
    t.drain_acked()
    th.join(5)
    assert woke.is_set() and t.room() == 1


def test_a_full_window_wakes_when_a_prefix_becomes_drainable() -> None:
    # the mirror loop is the only drainer: waiting for "room" alone would sleep out its whole
    # timeout while acknowledged entries sit undrained
    t: AckTracker[str, None] = AckTracker(3)
    e = add_n(t, 2) + add_n(t, 1, key=("t", "0-1"))
    assert t.room() == 0
    t.complete(e[1], 0)  # not its partition's oldest: nothing drainable yet
    assert not t.wait_for_room(0)
    t.complete(e[0], 0)
    assert t.wait_for_room(0)  # a drainable prefix: the waiter returns at once
    assert t.drain_acked()[K].count == 2
    t.complete(e[2], 0)  # after a drain, the flag is set again only by a new prefix
    assert t.wait_for_room(0) and t.drain_acked()[("t", "0-1")].count == 1


def test_failure_blocks_the_prefix_and_retry_resends_from_the_first_failure_in_order() -> None:
    t: AckTracker[str, None] = AckTracker(100)
    e = add_n(t, 5)
    t.complete(e[0], 0)
    t.fail(e[1], 0, OSError("down"))
    t.complete(e[2], 0)  # a later one succeeded: it is resent anyway, to restore order
    t.fail(e[3], 0, OSError("down"))
    t.complete(e[4], 0)
    assert t.has_failures and isinstance(t.last_error, OSError)
    assert t.wait_settled(0.01)
    assert t.drain_acked()[K].message == "m0"  # m1 failed: nothing past it is committable
    assert t.wait_for_room(0) is True  # a failure wakes the loop even with room
    retry = t.take_retry()
    assert [x.message for x in retry] == ["m1", "m2", "m3", "m4"]
    assert all(x.state is EntryState.PENDING and x.attempt == 1 for x in retry)
    assert not t.has_failures and t.pending == 4
    # callbacks of the superseded attempt are ignored
    t.complete(e[1], 0)
    assert e[1].state is EntryState.PENDING
    for x in retry:
        t.complete(x, 1)
    assert t.drain_acked()[K].message == "m4"


def test_wait_settled_per_partition() -> None:
    t: AckTracker[str, None] = AckTracker(100)
    a = add_n(t, 1, ("t", "0-0"))
    add_n(t, 1, ("t", "1-0"))
    assert not t.wait_settled(0.01)
    assert not t.wait_settled(0.01, [("t", "0-0")])
    t.fail(a[0], 0, OSError())
    assert t.wait_settled(0.01, [("t", "0-0")])
    assert not t.wait_settled(0.01)


def test_forget_drops_revoked_partitions_and_ignores_late_callbacks() -> None:
    t: AckTracker[str, None] = AckTracker(10)
    a = add_n(t, 3, ("t", "0-0"))
    b = add_n(t, 1, ("t", "1-0"))
    t.fail(a[1], 0, OSError())
    assert t.forget([("t", "0-0"), ("t", "9-9")]) == 3
    assert t.in_flight == 1 and t.pending == 1 and not t.has_failures
    t.complete(a[0], 0)  # late: ignored
    assert t.drain_acked() == {}
    t.complete(b[0], 0)
    assert set(t.drain_acked()) == {("t", "1-0")}


def test_rejects_a_non_positive_window() -> None:
    with pytest.raises(ValueError):
        AckTracker(0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=8), min_size=1, max_size=4),
       st.randoms(use_true_random=False))
def test_committable_message_never_passes_an_unacknowledged_one(sizes: list[int],
                                                                rnd: random.Random) -> None:
    """Whatever the completion order, every drained message has all its predecessors acked."""
    t: AckTracker[tuple[int, int], None] = AckTracker(1000)
    entries = [t.add(p, (p, i), None) for p, n in enumerate(sizes) for i in range(n)]
    order = entries[:]
    rnd.shuffle(order)
    acked: set[tuple[int, int]] = set()
    last: dict[int, int] = {}
    for e in order:
        t.complete(e, 0)
        acked.add(e.message)
        for d in t.drain_acked().values():
            p, i = d.message
            assert all((p, j) in acked for j in range(i + 1))
            assert i > last.get(p, -1)  # drained positions only move forward
            assert d.count == i - last.get(p, -1)
            last[p] = i
    assert last == {p: n - 1 for p, n in enumerate(sizes)}
    assert t.in_flight == 0
