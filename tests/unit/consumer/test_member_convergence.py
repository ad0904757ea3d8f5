"""Random joins, leaves, expiries and blips: the members always converge (hypothesis).

The real `MemberMachine` of every member, the small in-memory ZooKeeper of ``memberkit``.
After the faults stop and time passes, every live member owns exactly what the range
assignment names for it over the live members, nobody else owns anything, and every owner
znode holds its owner's thread id on its current session.  (The deterministic simulator
checks far more; this guards the machine's own test suite.)
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memberkit import Harness, Member
from test_member_machine import PARTS, _cluster, _member

from zkconsumer.consumer.assignment import assign
from zkconsumer.consumer.member_events import CloseRequested, Connection, ConnState, Start
from zkconsumer.consumer.member_state import MemberState

OPS = st.lists(st.tuples(st.sampled_from(["join", "close", "expire", "blip", "wait"]),
                         st.integers(0, 7), st.floats(0.0, 3.0)), min_size=1, max_size=14)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_members_converge_after_any_schedule(ops: list[tuple[str, int, float]]) -> None:
    h = Harness()
    _cluster(h)
    live: list[Member] = []
    sessions = iter(range(100, 10_000))
    names = iter(f"m{i:02d}" for i in range(100))
    for op, pick, seconds in ops:
        if op == "join" or not live:
            member = _member(h, next(names), next(sessions), rebalance_backoff_ms=500,
                             rebalance_retries_max=3)
            live.append(member)
            h.post(member, Start(member.session))
        elif op == "close":
            member = live.pop(pick % len(live))
            h.post(member, CloseRequested(h.now + 5.0))
        elif op == "expire":
            member = live[pick % len(live)]
            h.expire(member)
            member.session = next(sessions)
            h.post(member, Connection(ConnState.CONNECTED, member.session))
        elif op == "blip":
            member = live[pick % len(live)]
            h.post(member, Connection(ConnState.SUSPENDED))
            h.post(member, Connection(ConnState.CONNECTED, member.session))
        h.advance(seconds)
    h.advance(30.0)  # faults over: converge (failed rebalances retry after the backoff)
    ids = sorted(m.machine.config.consumer_id for m in live)
    threads = [f"{cid}-0" for cid in ids]
    owners: dict[str, str] = {}
    for member in h.members:
        cid = member.machine.config.consumer_id
        owned = sorted(name for _, name in member.machine.owned)
        if member not in live:
            assert member.machine.state is MemberState.CLOSED
            assert owned == []
            continue
        assert member.machine.state is MemberState.STABLE, member.machine.transitions[-3:]
        assert owned == sorted(assign(PARTS, threads, [f"{cid}-0"]))
        assert member.health is True
        for name in owned:
            assert name not in owners
            owners[name] = cid
    assert sorted(owners) == (PARTS if live else [])
    for name, cid in owners.items():
        node = h.zk.nodes[f"/consumers/g/owners/t/{name}"]
        member = next(m for m in live if m.machine.config.consumer_id == cid)
        assert node.data == f"{cid}-0".encode() and node.owner == member.session
