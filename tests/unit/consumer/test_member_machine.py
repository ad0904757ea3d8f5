"""The group member's pure state machine: its table, and event sequences -> commands.

Runs the real `MemberMachine` against the small in-memory ZooKeeper of ``memberkit`` (no
threads, no clock: time moves only when a test advances it).
"""

from __future__ import annotations

import itertools

import pytest
from memberkit import Harness, Member

from zkconsumer.consumer.assignment import assign
from zkconsumer.consumer.member_commands import (
    AddPartitions,
    CancelTimer,
    CloseSession,
    CommitDone,
    Create,
    DropPartitions,
    GetChildren,
    NotifyRevoked,
    PauseDelivery,
    ReportHealth,
    ResumeDelivery,
    RevokePartitions,
    SetTimer,
    StartFetchers,
    StopFetchers,
)
from zkconsumer.consumer.member_events import (
    Acked,
    CloseRequested,
    CommitRequested,
    Connection,
    ConnState,
    RebalanceRequested,
    Start,
    TimerName,
)
from zkconsumer.consumer.member_machine import MemberMachine
from zkconsumer.consumer.member_state import (
    TRANSITIONS,
    MemberConfig,
    MemberState,
    check_transition,
)
from zkconsumer.errors import LocalProtocolError, RebalanceFailedError
from zkconsumer.zk.topic_count import TopicCount

S = MemberState
PARTS = ["0-0", "0-1", "1-0", "1-1"]


def _cluster(h: Harness) -> None:
    h.zk.put("/brokers/ids/0", b"c0:127.0.0.1:9092")
    h.zk.put("/brokers/ids/1", b"c1:127.0.0.1:9093")
    h.zk.put("/brokers/topics/t/0", b"2")
    h.zk.put("/brokers/topics/t/1", b"2")
    h.zk.fired.clear()


def _plant_dead(h: Harness) -> None:
    """A member killed with -9 after claiming everything: its znodes live on (session 99)."""
    h.zk.put("/consumers/g/ids/g_0dead", b'{ "t": 1 }', owner=99)
    for name in PARTS:
        h.zk.put(f"/consumers/g/owners/t/{name}", b"g_0dead-0", owner=99)
    h.zk.fired.clear()


def _member(h: Harness, name: str, session: int, **overrides: object) -> Member:
    settings: dict[str, object] = {"rebalance_backoff_ms": 2000, "autocommit_enable": False,
                                   **overrides}
    config = MemberConfig(group="g", consumer_id=f"g_{name}",
                          topic_count=TopicCount.static({"t": 1}),
                          **settings)  # type: ignore[arg-type]
    return h.add(MemberMachine(config), session)


def _start(h: Harness, member: Member) -> None:
    h.post(member, Start(member.session))
    h.run()


def _owned(member: Member) -> list[str]:
    return sorted(name for _, name in member.machine.owned)


def _settled(h: Harness, members: list[Member]) -> bool:
    threads = [f"{m.machine.config.consumer_id}-0" for m in members]
    return all(_owned(m) == sorted(assign(PARTS, threads, [threads[i]]))
               for i, m in enumerate(members))


# -- the table ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)))
def test_the_table_is_the_judge(old: MemberState, new: MemberState) -> None:
    if new in TRANSITIONS[old]:
        check_transition(old, new, "test")
    else:
        with pytest.raises(LocalProtocolError, match=f"{old.name} -> {new.name}"):
            check_transition(old, new, "test")


def test_close_is_legal_from_every_state_but_the_end() -> None:
    for state in S:
        assert (S.CLOSING in TRANSITIONS[state]) == (state not in (S.CLOSING, S.CLOSED))


def test_an_illegal_move_raises_and_changes_nothing() -> None:
    machine = MemberMachine(MemberConfig("g", "g_a", TopicCount.static({"t": 1})))
    with pytest.raises(LocalProtocolError):
        machine._set_state(S.STABLE, "no")
    assert machine.state is S.INIT and machine.transitions == []


def test_events_before_start_are_a_usage_error() -> None:
    machine = MemberMachine(MemberConfig("g", "g_a", TopicCount.static({"t": 1})))
    with pytest.raises(LocalProtocolError, match="before Start"):
        machine.handle(RebalanceRequested(), 0.0)
    assert machine.handle(Connection(ConnState.SUSPENDED), 0.0) == []
    with pytest.raises(LocalProtocolError, match="backwards"):
        machine.handle(Start(1), -1.0)


# -- start, register, watch, claim -------------------------------------------------------------

def test_start_registers_as_scala_does_then_watches_and_claims() -> None:
    h = Harness()
    _cluster(h)
    a = _member(h, "a", 11)
    first = a.machine.handle(Start(11), 0.0)
    assert first == [Create(1, "/consumers/g/ids/g_a", b'{ "t": 1 }', ephemeral=True),
                     ReportHealth(False)]
    a.inbox.append(h.zk.execute(0, 11, first[0]))
    h.run()
    watched = {c.path for c in a.commands(GetChildren) if c.watch}
    assert watched == {"/consumers/g/ids", "/brokers/ids", "/brokers/topics/t"}
    assert a.machine.state is S.STABLE and a.start_result is None
    assert _owned(a) == PARTS
    assert a.states() == ["REBALANCING", "STABLE"]
    assert a.health is True
    (added,) = a.commands(AddPartitions)
    assert [p.partition for p in added.partitions] == PARTS
    assert all(p.offset is None and p.error is None for p in added.partitions)
    assert h.zk.nodes["/consumers/g/owners/t/0-0"].data == b"g_a-0"
    assert [b.id for b in a.commands(StartFetchers)[-1].brokers] == [0, 1]


def test_a_join_costs_one_release_not_a_backoff() -> None:
    h = Harness()
    _cluster(h)
    a, b = _member(h, "a", 11), _member(h, "b", 12)
    _start(h, a)
    _start(h, b)
    assert _settled(h, [a, b])
    # b conflicted once (a had not released yet) and retried when a's owners were deleted,
    # without waiting for its 2 s backoff: time never moved
    assert h.now == 0.0
    assert b.machine.stats.rebalance_attempts == 2 and b.machine.stats.rebalances == 1
    assert [t[1] for t in b.machine.transitions] == [S.REGISTERING, S.REBALANCING, S.BACKOFF,
                                                      S.REBALANCING, S.STABLE]
    # a released in the safe order: revoke, on_revoked, (commit), forget, delete
    kinds = [type(c) for c in a.log if isinstance(c, RevokePartitions | NotifyRevoked
                                                    | DropPartitions)]
    assert kinds == [RevokePartitions, NotifyRevoked, DropPartitions]


def test_a_dead_members_owners_exhaust_the_retries() -> None:
    h = Harness()
    _cluster(h)
    _plant_dead(h)
    a = _member(h, "a", 11, rebalance_retries_max=3)
    _start(h, a)
    assert a.machine.state is S.BACKOFF
    h.advance(2.0)
    h.advance(2.0)
    assert a.machine.state is S.FAILED
    assert isinstance(a.start_result, RebalanceFailedError)
    assert "g_0dead-0" in str(a.start_result)
    assert a.states()[-1] == "REBALANCE_FAILED"
    assert a.machine.stats.failed_rebalances == 1
    # once the dead session expires the retry converges
    h.zk.expire(99)
    h.advance(2.0)
    assert a.machine.state is S.STABLE and _owned(a) == PARTS


def test_close_mid_backoff_leaves_at_once() -> None:
    h = Harness()
    _cluster(h)
    _plant_dead(h)
    a = _member(h, "a", 11)
    _start(h, a)
    assert a.machine.state is S.BACKOFF and TimerName.BACKOFF in a.timers
    before = len(a.log)
    h.post(a, CloseRequested(deadline=h.now + 5.0))
    h.run()  # no time passes
    tail = a.log[before:]
    assert CancelTimer(TimerName.BACKOFF) in tail
    assert any(isinstance(c, CloseSession) for c in tail)
    assert a.machine.state is S.CLOSED and a.states()[-1] == "CLOSED"
    assert "/consumers/g/ids/g_a" not in h.zk.nodes
    # nothing runs after close: no rebalance starts, whatever fires
    h.advance(10.0)
    assert a.states().count("REBALANCING") == 1
    assert a.machine.handle(RebalanceRequested(), h.now) == []


# -- session -----------------------------------------------------------------------------------

def test_session_loss_releases_commits_forward_and_rejoins() -> None:
    h = Harness()
    _cluster(h)
    a = _member(h, "a", 11)
    _start(h, a)
    h.post(a, Acked("t", "0-0", 150))
    h.expire(a)
    h.run()
    assert a.machine.state is S.SESSION_LOST
    assert PauseDelivery() in a.log
    a.session = 12
    # a create retried across the expiry landed on the new session: not ours to keep
    h.zk.put("/consumers/g/owners/t/1-1", b"g_a-0", owner=12)
    h.zk.put("/consumers/g/offsets/t/0-0", b"100")
    h.zk.fired.clear()
    h.post(a, Connection(ConnState.CONNECTED, 12))
    h.run()
    assert a.machine.state is S.STABLE
    assert a.machine.stats.session_expirations == 1
    assert ResumeDelivery() in a.log
    assert h.zk.nodes["/consumers/g/offsets/t/0-0"].data == b"150"  # forward: written
    assert h.zk.nodes["/consumers/g/ids/g_a"].owner == 12
    assert all(h.zk.nodes[f"/consumers/g/owners/t/{n}"].owner == 12 for n in PARTS)
    assert a.states()[-3:] == ["SESSION_LOST", "REBALANCING", "STABLE"]


def test_a_blip_keeps_the_session_and_verifies_ownership() -> None:
    h = Harness()
    _cluster(h)
    a = _member(h, "a", 11)
    _start(h, a)
    h.post(a, Connection(ConnState.SUSPENDED))
    h.run()
    assert a.health is False and a.states()[-1] == "SUSPENDED"
    armed = len([c for c in a.commands(GetChildren) if c.watch])
    h.post(a, Connection(ConnState.CONNECTED, 11))
    h.run()
    assert a.states()[-3:] == ["RESUMED", "REBALANCING", "STABLE"]
    assert len([c for c in a.commands(GetChildren) if c.watch]) == armed + 3  # re-armed
    assert a.health is True and _owned(a) == PARTS
    assert a.machine.stats.session_expirations == 0


# -- commits -----------------------------------------------------------------------------------

def test_commits_write_only_acknowledged_offsets_by_compare_and_set() -> None:
    h = Harness()
    _cluster(h)
    a = _member(h, "a", 11)
    _start(h, a)
    h.post(a, CommitRequested(1))
    h.run()
    assert a.commands(CommitDone) == [CommitDone(1, 0)]
    assert not any(p.startswith("/consumers/g/offsets") for p in h.zk.nodes)
    h.post(a, Acked("t", "1-0", 700))
    h.post(a, CommitRequested(2))
    h.run()
    assert h.zk.nodes["/consumers/g/offsets/t/1-0"].data == b"700"
    # a Scala member's unversioned write moves it back; we own it: ours wins again
    h.zk.put("/consumers/g/offsets/t/1-0", b"900")
    h.post(a, Acked("t", "1-0", 800))
    h.post(a, CommitRequested(3))
    h.run()
    assert h.zk.nodes["/consumers/g/offsets/t/1-0"].data == b"800"
    assert a.commands(CommitDone)[-1] == CommitDone(3, 0)


def test_autocommit_is_a_timer() -> None:
    h = Harness()
    _cluster(h)
    a = _member(h, "a", 11, autocommit_enable=True, autocommit_interval_ms=1000)
    _start(h, a)
    assert SetTimer(TimerName.AUTOCOMMIT, 1.0) in a.log
    h.post(a, Acked("t", "0-1", 42))
    h.advance(1.0)
    assert h.zk.nodes["/consumers/g/offsets/t/0-1"].data == b"42"


# -- unknown outcomes (CONNECTION_LOSS: applied or not) ----------------------------------------

def test_a_lost_delete_is_swept_so_the_next_owner_can_claim() -> None:
    h = Harness()
    _cluster(h)
    a, b = _member(h, "a", 11), _member(h, "b", 12)
    _start(h, a)
    # a's release of 1-0 to b gets no answer and did not happen: the znode keeps a's id
    h.zk.lose[("Delete", "/consumers/g/owners/t/1-0")] = False
    _start(h, b)
    h.advance(30.0)
    assert _settled(h, [a, b])
    assert h.zk.nodes["/consumers/g/owners/t/1-0"].data == b"g_b-0"


def test_a_create_with_unknown_outcome_is_rolled_back() -> None:
    h = Harness()
    _cluster(h)
    a, b = _member(h, "a", 11), _member(h, "b", 12)
    _start(h, a)
    _start(h, b)
    # b leaves; a claims b's half but the create of 1-1 is applied without an answer ...
    h.zk.lose[("Create", "/consumers/g/owners/t/1-1")] = True
    h.post(b, CloseRequested(h.now + 1.0))
    h.run()
    # ... and before a retries, b comes back: 1-1 is b's again, a must not keep it
    b2 = _member(h, "b", 13)
    _start(h, b2)
    h.advance(30.0)
    assert _settled(h, [a, b2])
    assert h.zk.nodes["/consumers/g/owners/t/1-1"].data == b"g_b-0"
    assert h.zk.nodes["/consumers/g/owners/t/1-1"].owner == 13


def test_fetchers_stopped_by_a_failed_attempt_restart_when_nothing_changes() -> None:
    # F5 (seeds 12350, 21840): an attempt stops the fetchers to claim a new partition and
    # fails; the next attempt keeps exactly what was owned -- it must start them again
    h = Harness()
    _cluster(h)
    a = _member(h, "a", 11)
    _start(h, a)
    h.zk.put("/brokers/ids/2", b"c2:127.0.0.1:9094")
    h.run()
    h.zk.lose[("GetData", "/consumers/g/offsets/t/2-0")] = False
    h.zk.put("/brokers/topics/t/2", b"1")  # partition 2-0 appears: a claims it, fails
    h.run()
    assert a.machine.state is S.BACKOFF
    fetcher_commands = [c for c in a.log if isinstance(c, StartFetchers | StopFetchers)]
    assert isinstance(fetcher_commands[-1], StopFetchers)
    h.zk.remove("/brokers/topics/t/2")  # gone again: the next attempt changes nothing
    h.advance(5.0)
    assert a.machine.state is S.STABLE and _owned(a) == PARTS
    fetcher_commands = [c for c in a.log if isinstance(c, StartFetchers | StopFetchers)]
    assert isinstance(fetcher_commands[-1], StartFetchers)
