"""Offset commits never move a stored offset backwards unless we own the partition now.

Real ZooKeeper, real session expiry (`zk_expire`); the member's machine is stepped directly
(its claim and commit procedures, executed one request at a time on a real session) so each
interleaving is exact.  The other member is either a second `ZkSession` acting like a
Python member or a raw kazoo client writing the way a Scala 0.7.2 member does
(``updatePersistentPath``: a set without version).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient

from zkconsumer.consumer.member_driver import run_request
from zkconsumer.consumer.member_machine import MemberMachine
from zkconsumer.consumer.member_ownership import claim, commit, write_offset
from zkconsumer.consumer.member_state import MemberConfig, Owned, Proc
from zkconsumer.consumer.member_zkops import awaited
from zkconsumer.zk.offsets import commit_offset, read_offset
from zkconsumer.zk.requests import ZkRequests
from zkconsumer.zk.session import ZkSession
from zkconsumer.zk.topic_count import TopicCount

GROUP = "g"
KEY = ("t", "0-0")
OFFSET = f"/consumers/{GROUP}/offsets/t/0-0"
OWNER = f"/consumers/{GROUP}/owners/t/0-0"


class _Member:
    """A machine whose procedures run synchronously on a real session."""

    def __init__(self, session: ZkSession) -> None:
        self.session = session
        self.machine = MemberMachine(MemberConfig(GROUP, "c1", TopicCount.static({"t": 1})))
        self.machine.session_id = session.session_id
        self._zk = ZkRequests(session, lambda _path, _kind: None)

    def run(self, proc: Proc) -> Any:
        value: Any = None
        while True:
            try:
                batch = proc.send(value)
            except StopIteration as stop:
                return stop.value
            # claims and commits only wait for ZooKeeper requests (no timer, no listener)
            value = {req: run_request(self._zk, c) for c in batch
                     if (req := getattr(c, "req", None)) in awaited(batch)}

    def commit(self) -> int:
        return int(self.run(commit(self.machine)))

    def write_reset(self, state: Owned, offset: int) -> None:
        if self.run(write_offset(self.machine, state, offset, may_rewind=True)):
            state.committed = offset


def _claim_at(member: _Member, offset: int) -> Owned:
    commit_offset(member.session, GROUP, "t", "0-0", offset)
    assert member.run(claim(member.machine, {KEY: "c1-0"})) == []
    state = member.machine.owned[KEY]
    assert state.committed == offset
    return state


def _ack(state: Owned, next_offset: int) -> None:
    state.acked = next_offset  # what an Acked event does


def test_late_commit_after_expiry_does_not_rewind_the_new_owner(
        zk_session_factory: Callable[..., ZkSession], zk_connect: str,
        zk_expire: Callable[..., int]) -> None:
    ours = zk_session_factory()
    own = _Member(ours)
    state = _claim_at(own, 100)
    _ack(state, 150)
    assert own.commit() == 0
    assert read_offset(ours, GROUP, "t", "0-0") == 150
    _ack(state, 200)  # processed, not yet committed when the session dies

    zk_expire(ours, wait_reconnect=True)  # our owner znode is gone with the old session
    other = zk_session_factory()
    assert other.create_ephemeral_expect_conflict(OWNER, b"c2-0")
    commit_offset(other, GROUP, "t", "0-0", 500)  # the new owner consumed further

    # Our autocommit runs before the machine handled the new session: a plain commit.
    assert own.commit() == 0
    assert read_offset(other, GROUP, "t", "0-0") == 500
    assert state.committed == 150  # ours was not written
    # The reset path of a stale fetcher is fenced the same way.
    own.write_reset(state, 0)
    assert read_offset(other, GROUP, "t", "0-0") == 500


def test_late_commit_may_still_move_the_offset_forward(
        zk_session_factory: Callable[..., ZkSession], zk_connect: str,
        zk_expire: Callable[..., int]) -> None:
    """Ahead of what the new owner stored, our acknowledged offset loses nothing: written."""
    ours = zk_session_factory()
    own = _Member(ours)
    state = _claim_at(own, 100)
    _ack(state, 400)
    zk_expire(ours, wait_reconnect=True)
    other = zk_session_factory()
    commit_offset(other, GROUP, "t", "0-0", 120)
    assert own.commit() == 0
    assert read_offset(other, GROUP, "t", "0-0") == 400
    assert state.committed == 400


def test_a_write_retried_onto_a_new_session_cannot_clobber(
        zk_session_factory: Callable[..., ZkSession], zk_expire: Callable[..., int]) -> None:
    """What `ZkSession._op` does with an in-flight commit after a connection loss: resend
    the same versioned set, now on the new session.  It must fail, not overwrite."""
    ours = zk_session_factory()
    commit_offset(ours, GROUP, "t", "0-0", 100)
    node = ours.get_node(OFFSET)
    assert node is not None
    zk_expire(ours, wait_reconnect=True)
    commit_offset(zk_session_factory(), GROUP, "t", "0-0", 500)
    assert ours.set_if_version(OFFSET, b"150", node.version) is None
    assert ours.get(OFFSET) == b"500"
    # ... while a retry of a write that did land is recognised by its value, not redone.
    version = ours.set_if_version(OFFSET, b"600", node.version + 1)
    assert version == node.version + 2
    assert ours.set_if_version(OFFSET, b"600", node.version + 1) is None


def test_commits_still_work_after_a_scala_member_wrote(
        zk_session_factory: Callable[..., ZkSession], zk_connect: str,
        zk_client: KazooClient) -> None:
    """Scala writes without a version (it bumps the version under our feet).  As long as we
    own the partition, our commit re-reads and is written, ahead of or behind theirs."""
    ours = zk_session_factory()
    own = _Member(ours)
    state = _claim_at(own, 100)
    zk_client.set(OFFSET, b"50")  # a Scala member's late autocommit (reference race)
    _ack(state, 200)
    assert own.commit() == 0
    assert zk_client.get(OFFSET)[0] == b"200"
    zk_client.set(OFFSET, b"900")  # e.g. an offsets import while we run: we own, ours wins
    _ack(state, 300)
    assert own.commit() == 0
    assert zk_client.get(OFFSET)[0] == b"300"
    _ack(state, 350)  # and the fast path (known version) works again afterwards
    assert own.commit() == 0
    assert zk_client.get(OFFSET)[0] == b"350"


def test_no_rewind_when_our_owner_znode_was_taken_on_the_same_session(
        zk_session_factory: Callable[..., ZkSession], zk_connect: str,
        zk_client: KazooClient) -> None:
    ours = zk_session_factory()
    own = _Member(ours)
    state = _claim_at(own, 100)
    zk_client.delete(OWNER)  # lost behind our back (e.g. deleted by an operator) ...
    zk_client.create(OWNER, b"c2-0", ephemeral=True)  # ... and claimed by another member
    zk_client.set(OFFSET, b"700")
    _ack(state, 200)
    assert own.commit() == 0
    assert zk_client.get(OFFSET)[0] == b"700"
