"""AckTracker: latest acknowledgement per partition, and revoked claims."""

from __future__ import annotations

from daemon_unit_helpers import make_messages

from zkconsumer.daemon.tracker import AckTracker


def test_keeps_latest_per_partition() -> None:
    t = AckTracker()
    a = make_messages(5, partition=0)
    b = make_messages(3, partition=1)
    with t.cond:
        t.acked(a[:2])
        t.acked(b)
        t.acked(a[2:4])
    taken = t.take()
    assert sorted(taken, key=lambda m: m.partition_id) == [a[3], b[2]]
    assert t.acked_messages == 7
    assert t.take() == []


def test_acks_of_revoked_claim_are_dropped() -> None:
    t = AckTracker()
    old = make_messages(4, partition=0)
    other = make_messages(2, partition=1)
    t.revoke([("t", 0, 0)])
    with t.cond:
        t.acked(old + other)  # submitted before the revocation
    assert t.take() == [other[1]]
    assert t.abandoned_acks == 4
    # a new claim of the partition (owned again) counts
    new = make_messages(2, partition=0, start=1000)
    with t.cond:
        t.acked(new)
    assert t.take() == [new[1]]


def test_revoke_drops_untaken_acks_and_marks_stale() -> None:
    t = AckTracker()
    m = make_messages(1)
    other = make_messages(1, partition=1)
    with t.cond:
        t.acked(m)
    t.revoke([("t", 0, 0)])
    assert t.take() == []
    with t.cond:
        assert t.is_stale(m[0])
        assert not t.is_stale(other[0])
        assert not t.is_stale(make_messages(1)[0])  # a later claim of the same partition


def test_current_drops_only_revoked_claims() -> None:
    t = AckTracker()
    a = make_messages(3, partition=0)
    b = make_messages(2, partition=1)
    batch = a + b
    assert t.current(batch) is batch  # nothing revoked: the same object
    t.revoke([("t", 0, 0)])
    a2 = make_messages(2, partition=0, start=500)  # claimed back right after
    with t.cond:
        assert t.current(a + b) == b
        assert t.current(b) == b
        # one poll may hold the end of the old claim and the start of the new one
        assert t.current(a + a2 + b) == a2 + b
        assert t.current(a2 + a) == a2

