"""The seeds that found the member machine's defects (issue 18), each run explicitly.

`test_sim_volume` covers seeds 0-9999 as a range, but a range says nothing about which
seed guards which defect, and F5's seeds lie outside it.  Each test here replays one seed
with the simulator and machine of today and asserts that no invariant is violated; its
docstring names the defect the seed found and the invariant (docs/architecture.md,
"Simulation") that caught it.  If a change of the simulator makes a seed stop walking the
path, pin the path with ``Spec.plan`` rather than deleting the test.
"""

from __future__ import annotations

from zkconsumer.sim.batch import quiet
from zkconsumer.sim.run import Outcome, Spec, run_schedule


def _run(seed: int) -> Outcome:
    with quiet():
        return run_schedule(Spec(seed))


def _assert_clean(seed: int) -> None:
    outcome = _run(seed)
    replay = f"replay: zkconsumer bench simulate --start {seed} --seeds 1 --trace"
    assert outcome.violations == [], f"seed {seed}: {outcome.violations}; {replay}"


def test_f5_fetchers_restarted_after_a_failed_attempt_two_members() -> None:
    """F5, seed 12350 (2 members): an attempt emitted StopFetchers, then failed on a
    ZooKeeper restart (CONNECTION_LOSS reading an offset); the next attempt kept the same
    partitions and, seeing nothing to claim or release, never started the fetchers again:
    the member owned five partitions and fetched none.  Caught by liveness / no loss
    (a member that owns partitions delivers them)."""
    _assert_clean(12350)


def test_f5_fetchers_restarted_after_a_failed_attempt_eight_members() -> None:
    """F5, seed 21840 (8 members): the same defect in a larger group -- StopFetchers, a
    connection blip fails the attempt, no StartFetchers after the successful retry.
    Caught by liveness / no loss.  Once F5 was fixed the seed showed a second defect: a
    claim's Create in flight when a process pause expired the session was abandoned with
    its procedure, retried by the session layer onto the NEW session after the recovery's
    sweep of leftovers, and so left an owner znode of ours that we did not own, blocking
    the partition's next owner forever (liveness: "owner None, assignment says ...").
    Now an abandoned owner create stays doubtful until answered, and its answer triggers
    the sweep."""
    _assert_clean(21840)


def test_f1_watches_rearmed_after_a_session_expiry() -> None:
    """F1, seed 36 (2 members): after SUSPENDED, LOST and a new session the member
    re-registered and rebalanced but never armed a watch again, so later group changes
    left partitions unowned.  Caught by liveness ("nobody deaf": every live member holds
    a watch on /consumers/G/ids and its topics)."""
    _assert_clean(36)


def test_f3_retried_owner_delete_spares_the_next_owner_no_restart() -> None:
    """F3, seed 2144 (2 members, no ZooKeeper restart): a versioned Delete of an owner
    znode was applied, a blip lost its answer, the next owner created its znode (version
    0 again) and the blind retry deleted it; that owner then delivered without an owner
    znode.  Caught by exclusive delivery."""
    _assert_clean(2144)


def test_f3_retried_owner_delete_spares_the_next_owner_restart() -> None:
    """F3, seed 5203 (7 members, 3 of them Scala): the same retried Delete(version=0),
    its answer lost to a ZooKeeper restart, removing another member's new owner znode.
    Caught by exclusive delivery."""
    _assert_clean(5203)


def test_f4_failed_release_delete_is_redone() -> None:
    """F4, seed 5700 (2 members): owner-znode Deletes of a release answered
    CONNECTION_LOSS were never redone; the znodes, ephemeral on the member's live session,
    blocked the partitions' new owner on every attempt.  Caught by liveness."""
    _assert_clean(5700)


def test_f4_failed_release_delete_does_not_block_our_own_thread() -> None:
    """F4, seed 1049 (2 members): the stale owner znode left by a failed release was then
    assigned to another thread of the same member, which conflicted with itself forever.
    Caught by liveness."""
    _assert_clean(1049)


def test_claim_create_applied_without_an_answer() -> None:
    """Seed 556 (F4 family): a claim's Create was applied but its answer lost, so the
    member neither knew it owned the partition nor deleted the znode (owner None / stale
    owner after a failed release).  Caught by liveness (every partition owned as the
    assignment says, once the group is quiet)."""
    _assert_clean(556)
