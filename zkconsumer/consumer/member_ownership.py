"""Owned partitions in ZooKeeper: release, claim, verify, leftovers and offset commits.

Procedures of the pure machine (see `zkconsumer.consumer.member_zkops` for the plumbing).

Invariants (REFERENCE §2.4, §6.2, §6.4, and our fixes):

* **release** = revoke (no more hand-out), ``on_revoked`` (last chance to ack), commit,
  forget, and only then delete the owner znodes -- and only those that still hold our
  thread id on our current session (KAFKA-262; after an expiry another member may hold it);
* **claim** is all or nothing, in sorted order; the first conflict rolls back every owner
  znode this claim created.  A znode holding exactly our value on *our* session counts as
  ours (a create retried after a lost answer), as ``createEphemeralPathExpectConflict``;
* offsets of newly claimed partitions are read *after* the claim, so they include the
  previous owner's final commit; an unreadable one parks only that partition;
* a **commit** is a compare-and-set on the offset znode's version and never moves a stored
  offset backwards unless this member still owns the partition on the session it claimed
  it in (owner znode with our thread id, ephemeral on our current session).  So a commit
  retried late -- onto a new session, after a new owner advanced the offset -- re-reads and
  leaves the new owner's offset alone.  A committed offset is never ahead of an `Acked` one
  (only acknowledged offsets are written).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from zkconsumer.consumer.member_commands import (
    AddPartitions,
    Create,
    Delete,
    DropPartitions,
    Exists,
    GetChildren,
    GetData,
    NotifyRevoked,
    OwnedPartition,
    RecordCommitted,
    RevokePartitions,
    SetData,
)
from zkconsumer.consumer.member_events import (
    Key,
    ZkError,
    ZkReply,
)
from zkconsumer.consumer.member_host import Member
from zkconsumer.consumer.member_state import Owned, Proc
from zkconsumer.consumer.member_zkops import (
    Conflict,
    call,
    calls,
    children_of,
    create_expect_conflict,
    data_of,
    expect_ok,
    failed,
    gather,
    group_by_topic,
)
from zkconsumer.errors import ZkConsumerError, ZnodeDataError, ZooKeeperError
from zkconsumer.zk.paths import (
    encode_offset,
    offset_path,
    owner_path,
    owners_path,
    owners_topic_path,
    parse_offset,
)

__all__ = [
    "claim",
    "commit",
    "delete_if_ours",
    "delete_leftovers",
    "notify_revoked",
    "owns_now",
    "release",
    "sweep_doubtful",
    "verify",
    "watch_conflicts",
    "write_offset",
]

log = logging.getLogger(__name__)


# -- release and claim -------------------------------------------------------------------------

def release(m: Member, keys: Iterable[Key], *, delete_owners: bool = True,
            forward_only: bool = False) -> Proc:
    """Revoke partitions in the safe order: revoke, notify, commit, forget, delete znodes.

    Fetchers must already be stopped.  ``delete_owners`` is False after a session loss
    (the znodes died with the session)."""
    states = [m.owned[k] for k in keys if k in m.owned]
    if not states:
        return None
    ks = tuple(o.key for o in states)
    log.info("%s: releasing %s", m.config.consumer_id, group_by_topic(ks))
    m.emit(RevokePartitions(ks))
    yield from notify_revoked(m, states)
    yield from commit(m, states, forward_only=forward_only)
    for o in states:
        m.owned.pop(o.key, None)
    m.emit(DropPartitions(ks))
    if delete_owners:
        yield from gather([delete_if_ours(m, owner_path(m.config.group, o.topic, o.name),
                                          o.thread_id.encode()) for o in states])
    return None


def notify_revoked(m: Member, states: Iterable[Owned]) -> Proc:
    """``on_revoked`` once per claim; waits for it (acks made there are committed)."""
    fresh = [o for o in states if not o.revoke_notified]
    for o in fresh:
        o.revoke_notified = True
    if fresh:
        yield [NotifyRevoked(m.req(), group_by_topic(o.key for o in fresh))]
    return None


def delete_if_ours(m: Member, path: str, value: bytes) -> Proc:
    """Delete an owner znode only if it holds ``value`` *and* belongs to our current
    session: after an expiry another member may hold it, and only the session tells our
    znode from theirs.  Failures are logged, not raised: the znode is remembered as
    *doubtful* and deleted before the next claim (`sweep_doubtful`), else it would block the
    partition's next owner for as long as our session lives."""
    got = yield from call(GetData(m.req(), path))
    if got.error is ZkError.NO_NODE:
        return False
    if got.error is not None:
        log.warning("could not release %s: %s", path, failed(got, "get", path))
        m.doubtful.add((path, value))
        return False
    owner = got.stat.ephemeral_owner if got.stat else 0
    if got.data != value or m.session_id is None or owner != m.session_id:
        log.warning("not deleting %s: it holds %r of session 0x%x, not our %r of 0x%x",
                    path, got.data, owner, value, m.session_id or 0)
        return False
    version = got.stat.version if got.stat else -1
    gone = yield from call(Delete(m.req(), path, version))
    if gone.error not in (None, ZkError.NO_NODE):
        log.warning("could not release %s: %s", path, failed(gone, "delete", path))
        m.doubtful.add((path, value))
        return False
    return True


def sweep_doubtful(m: Member) -> Proc:
    """Delete owner znodes whose create or delete had an unknown outcome (CONNECTION_LOSS:
    it may have been applied) and that we do not own: such a znode carries our thread id on
    our session, so nobody else could ever claim the partition while we live."""
    owned = {owner_path(m.config.group, t, n) for t, n in m.owned}
    doubtful = sorted(d for d in m.doubtful if d[0] not in owned)
    m.doubtful.clear()
    if doubtful:
        log.info("%s: removing owner znodes of unknown fate: %s", m.config.consumer_id,
                 ", ".join(p for p, _ in doubtful))
        yield from gather([delete_if_ours(m, p, v) for p, v in doubtful])
    return None


def claim(m: Member, wanted: Mapping[Key, str]) -> Proc:
    """Create every owner znode of ``wanted`` or none; returns the conflicts found.

    On success the partitions are owned (`AddPartitions`, offsets read now; fetchers are
    not started)."""
    cfg = m.config
    items = sorted(wanted.items())
    created: list[tuple[str, bytes]] = []
    conflicts: list[Conflict] = []
    claim_session = m.session_id
    try:
        for i, ((topic, name), thread) in enumerate(items):
            path = owner_path(cfg.group, topic, name)
            try:
                ours, holder = yield from create_expect_conflict(m, path, thread.encode())
            except ZkConsumerError:
                m.doubtful.add((path, thread.encode()))  # may have been created
                raise
            if ours:
                created.append((path, thread.encode()))
                continue
            conflicts.append((path, holder))
            # Fail fast (fewer znodes to roll back, less disturbance to the others), but
            # report every conflicting owner we can see, for the error message.
            rest = [(owner_path(cfg.group, t, n), th) for (t, n), th in items[i + 1:]]
            replies = yield from calls([GetData(m.req(), p) for p, _ in rest])
            for (p, th), reply in zip(rest, replies, strict=True):
                if reply.error is None and (reply.data or b"") != th.encode():
                    conflicts.append((p, reply.data or b""))
            break
        if not conflicts:
            paths = [offset_path(cfg.group, t, n) for (t, n), _ in items]
            replies = yield from calls([GetData(m.req(), p) for p in paths])
            parts = [_claimed(m, key, thread, path, reply, claim_session)
                     for (key, thread), path, reply in zip(items, paths, replies, strict=True)]
    except ZkConsumerError:
        yield from gather([delete_if_ours(m, p, v) for p, v in created])
        raise
    if conflicts:
        yield from gather([delete_if_ours(m, p, v) for p, v in created])
        return conflicts
    for owned, _ in parts:
        m.owned[owned.key] = owned
    m.emit(AddPartitions(tuple(p for _, p in parts)))
    for owned, part in parts:
        if part.error is not None:  # parked at the claim (unreadable committed offset)
            log.error("not fetching %s/%s: %s", owned.topic, owned.name, part.error)
            m.arm_parked_timer()
    return []


def _claimed(m: Member, key: Key, thread: str, path: str, reply: ZkReply,
             claim_session: int | None) -> tuple[Owned, OwnedPartition]:
    """The record of a just-claimed partition from its offset read.

    An unreadable committed offset (``abc``, ``-5``, ``1.5``, beyond 2**63-1, empty) parks
    only this partition: the application gets the error once from poll and nothing is
    ever committed for it, so the bad value stays for an operator to see and fix."""
    topic, name = key
    data = data_of(reply, path)
    if data is None:
        offset, version = None, None
    else:
        try:
            offset = parse_offset(path, data)
            version = reply.stat.version if reply.stat else None
        except ZnodeDataError as exc:
            why = str(exc).rsplit(" [znode ", 1)[0]  # the new error names path and value
            error = ZnodeDataError(
                f"committed offset of {topic}/{name} is unreadable, the partition is parked "
                f"(the others are consumed); set it with `zkconsumer offsets reset --zk ZK "
                f"--group {m.config.group} --topic {topic} --to earliest|latest|FILE` (stop "
                f"the group's members first or add --force): {why}", path=exc.path,
                data=exc.data)
            owned = Owned(topic, name, thread, claim_session, None, None, None,
                          parked=str(error))
            return owned, OwnedPartition(topic, name, thread, None, error)
    owned = Owned(topic, name, thread, claim_session, version, offset, offset)
    return owned, OwnedPartition(topic, name, thread, offset)


def verify(m: Member, keys: Iterable[Key]) -> Proc:
    """Keys whose owner znode no longer holds our thread id (lost behind our back)."""
    states = [m.owned[k] for k in sorted(keys) if k in m.owned]
    paths = [owner_path(m.config.group, o.topic, o.name) for o in states]
    replies = yield from calls([GetData(m.req(), p) for p in paths])
    lost = set()
    for o, path, reply in zip(states, paths, replies, strict=True):
        holder = data_of(reply, path)
        if holder != o.thread_id.encode():
            log.warning("owner znode of %s/%s holds %r, expected %r", o.topic, o.name,
                        holder, o.thread_id)
            lost.add(o.key)
    return lost


def watch_conflicts(m: Member, paths: Iterable[str]) -> None:
    """Arm an exists-watch on each conflicting owner znode (the backoff ends early once
    they are all gone); their replies are routed by the machine, not by a procedure."""
    for path in sorted(paths):
        req = m.req()
        m.exists_reqs[req] = path
        m.emit(Exists(req, path, watch=True))


def delete_leftovers(m: Member) -> Proc:
    """Delete every owner znode of the group held by our current session but not owned.

    After a session expiry, once everything was released and before we register again.
    An owner-znode create in flight when the old session died may be retried by the session
    layer onto the *new* session: it carries our thread id but no state of ours, so no
    release would ever delete it, and the member the next rebalance gives that partition to
    could never claim it (a Scala member gives up after its retries: never consumed)."""
    group = m.config.group
    topics = children_of((yield from call(GetChildren(m.req(), owners_path(group)))),
                       owners_path(group))
    lists = [GetChildren(m.req(), owners_topic_path(group, t)) for t in topics]
    replies = yield from calls(lists)
    keys = [(t, n) for t, q, r in zip(topics, lists, replies, strict=True)
            for n in children_of(r, q.path)]
    reads = [GetData(m.req(), owner_path(group, t, n)) for t, n in keys]
    replies = yield from calls(reads)
    doomed: list[Delete] = []
    for key, read, reply in zip(keys, reads, replies, strict=True):
        if data_of(reply, read.path) is None or reply.stat is None:
            continue
        if reply.stat.ephemeral_owner != m.session_id or key in m.owned:
            continue
        log.warning("deleting %s = %r: created on our new session by a request retried "
                    "across the session expiry", read.path, reply.data)
        doomed.append(Delete(m.req(), read.path, reply.stat.version))
    replies = yield from calls(doomed)
    for delete, reply in zip(doomed, replies, strict=True):
        if reply.error not in (None, ZkError.NO_NODE, ZkError.BAD_VERSION):
            raise failed(reply, "delete", delete.path)
    return [d.path for d in doomed]


# -- commits -----------------------------------------------------------------------------------

def commit(m: Member, states: Iterable[Owned] | None = None, *,
           forward_only: bool = False) -> Proc:
    """Write changed acknowledged offsets, all partitions at once; returns the failures.

    ``forward_only`` after a session loss, when our owner znodes are gone and another
    member may already own the partition: our acknowledged offset is written only if it is
    *ahead* of the stored one -- that never loses a message and never rewinds a new owner.
    The same check guards the first write of a position that did not come from ZooKeeper
    (an ``autooffset.reset`` start)."""
    targets = list(m.owned.values()) if states is None else list(states)
    todo = [(o, o.acked) for o in targets
            if o.parked is None and o.acked is not None and o.acked != o.committed]
    if not todo:
        return 0
    started = m.now
    results = yield from gather([_commit_one(m, o, v, forward_only) for o, v in todo])
    failures = sum(1 for r in results if r is not True)
    m.stats.commits += 1
    m.stats.commit_failures += failures
    m.stats.last_commit_latency = m.now - started
    return failures


def _commit_one(m: Member, o: Owned, value: int, forward_only: bool) -> Proc:
    try:
        rewind = not forward_only and o.committed is not None
        written = yield from write_offset(m, o, value, may_rewind=rewind)
    except ZkConsumerError as exc:
        log.warning("could not commit offset %s of %s/%s: %s", value, o.topic, o.name, exc)
        return False
    if written:
        log.debug("committed %s/%s = %s", o.topic, o.name, value)
        o.committed = value
        m.stats.offsets_written += 1
        m.emit(RecordCommitted(o.topic, o.name, value))
    return True  # not written: a stored offset ahead of ours was kept, nothing to retry


def write_offset(m: Member, o: Owned, value: int, *, may_rewind: bool,
                 attempts: int = 10) -> Proc:
    """Compare-and-set ``value``; False if a stored offset ahead of it was kept.

    ``may_rewind`` False: write only if ahead of the stored offset.  True: a stored offset
    ahead of ours (someone else wrote) is overwritten only if we still own the partition
    on the session we claimed it in (`owns_now`).  Without rewinds the znode is read first
    even when its version is known: the decision never depends on what we believe."""
    path = offset_path(m.config.group, o.topic, o.name)
    data = encode_offset(value)
    version = o.version if may_rewind else None
    for _ in range(attempts):
        if version is None:
            got = yield from call(GetData(m.req(), path))
            if got.error is ZkError.NO_NODE:
                made = yield from call(Create(m.req(), path, data))
                if made.error is None:
                    o.version = made.stat.version if made.stat else 0
                    return True
                if made.error is ZkError.NODE_EXISTS:
                    continue  # created by someone else just now: look at it
                raise failed(made, "create", path)
            expect_ok(got, "get", path)
            try:
                stored: int | None = parse_offset(path, got.data or b"")
            except ZnodeDataError as exc:
                log.warning("overwriting an unreadable offset: %s", exc)
                stored = None
            current = got.stat.version if got.stat else -1
            if stored == value:
                o.version = current
                return True
            if stored is not None and stored > value:
                if not (may_rewind and (yield from owns_now(m, o))):
                    o.version = None
                    log.info("not committing %s/%s at %s: %s is stored and we %s", o.topic,
                             o.name, value, stored, "may not move it back" if may_rewind
                             else "only move it forward now")
                    return False
                log.warning("%s/%s: offset %s was written by someone else while we own the "
                            "partition; writing ours (%s) over it", o.topic, o.name, stored,
                            value)
            version = current
        put = yield from call(SetData(m.req(), path, data, version))
        if put.error is None:
            o.version = put.stat.version if put.stat else None
            return True
        if put.error in (ZkError.BAD_VERSION, ZkError.NO_NODE):
            version = None  # changed under us (another writer, or our own retried write)
            continue
        raise failed(put, "set", path)
    raise ZooKeeperError(f"commit {path}: the offset keeps changing under us")


def owns_now(m: Member, o: Owned) -> Proc:
    """Our current session is the claim's session and still holds our owner znode."""
    sid = m.session_id
    if m.owned.get(o.key) is not o or sid is None or sid != o.claim_session:
        return False
    path = owner_path(m.config.group, o.topic, o.name)
    got = yield from call(GetData(m.req(), path))
    if got.error is ZkError.NO_NODE:
        return False
    expect_ok(got, "get", path)
    return (got.data == o.thread_id.encode() and got.stat is not None
            and got.stat.ephemeral_owner == sid)
