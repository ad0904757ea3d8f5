"""AckTracker: latest acknowledgement per partition, and revocation generations."""

from __future__ import annotations

from daemon_unit_helpers import make_messages

from zkconsumer.daemon.tracker import AckTracker


def test_keeps_latest_per_partition() -> None:
    t = AckTracker()
    a = make_messages(5, partition=0)
    b = make_messages(3, partition=1)
    with t.cond:
        t.acked(a[:2], t.generation)
        t.acked(b, t.generation)
        t.acked(a[2:4], t.generation)
    taken = t.take()
    assert sorted(taken, key=lambda m: m.partition_id) == [a[3], b[2]]
    assert t.acked_messages == 7
    assert t.take() == []


def test_acks_of_revoked_partition_are_dropped() -> None:
    t = AckTracker()
    old = make_messages(4, partition=0)
    other = make_messages(2, partition=1)
    with t.cond:
        gen = t.generation
    t.revoke([("t", 0, 0)])
    with t.cond:
        t.acked(old + other, gen)  # submitted before the revocation
    assert t.take() == [other[1]]
    assert t.abandoned_acks == 4
    # a batch submitted after the revocation (partition owned again) counts
    new = make_messages(2, partition=0, start=1000)
    with t.cond:
        t.acked(new, t.generation)
    assert t.take() == [new[1]]


def test_revoke_drops_untaken_acks_and_is_current() -> None:
    t = AckTracker()
    m = make_messages(1)
    with t.cond:
        gen = t.generation
        t.acked(m, gen)
    t.revoke([("t", 0, 0)])
    assert t.take() == []
    assert not t.is_current(("t", 0, 0), gen)
    assert t.is_current(("t", 0, 0), t.generation)
    assert t.is_current(("t", 0, 1), gen)


def test_current_drops_partitions_revoked_since_the_poll() -> None:
    t = AckTracker()
    a = make_messages(3, partition=0)
    b = make_messages(2, partition=1)
    polled_at = t.generation
    assert t.current(a + b, polled_at) == a + b  # nothing happened since: the same object
    t.revoke([("t", 0, 0)])
    with t.cond:
        assert t.current(a + b, polled_at) == b
        assert t.current(a + b, t.generation) == a + b  # re-assigned and polled again
        assert t.current(a + b, None) == a + b
