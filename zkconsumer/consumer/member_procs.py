"""The member's flows on top of its ZooKeeper steps: start, rebalance with retries and
backoff, session recovery, commits on request, health checks and close.

Called by `zkconsumer.consumer.member_machine.MemberMachine` from its event handlers; every
function here runs inside one ``handle`` call, changes state only through
``Member._set_state`` and emits commands through the machine.  The multi-step work
is queued as procedures (`member_zkops`); this module decides *when* each runs and what
its outcome means.

Rebalance (REFERENCE §2.4, with our changes): up to ``rebalance.retries.max`` attempts,
``rebalance.backoff.ms`` apart.  After an owner conflict the backoff ends as soon as every
conflicting owner znode is gone (an exists-watch on each), so a join costs one release, not
one whole backoff; a watch firing meanwhile (the group changed: our decision is stale and
may block others) ends it too and does not count as a retry (Scala would start a fresh
``syncedRebalance``), the total being capped at ``attempts_cap_factor`` x retries.  After
the last attempt: `RebalanceFailedError`, state FAILED (REBALANCE_FAILED), and a fresh
rebalance after the backoff -- the first rebalance reports it through `StartDone` instead.
"""

from __future__ import annotations

import logging
from typing import Any

from zkconsumer.consumer import member_ownership as own
from zkconsumer.consumer import member_zkops as ops
from zkconsumer.consumer.member_commands import (
    CloseSession,
    DropPartitions,
    Exists,
    NotifyAssigned,
    RecordCommitted,
    ResumeDelivery,
    RevokePartitions,
    StopFetchers,
)
from zkconsumer.consumer.member_events import (
    AssignmentCheckRequested,
    CommitRequested,
    ConnState,
    TimerName,
)
from zkconsumer.consumer.member_host import Member
from zkconsumer.consumer.member_state import MemberState, Owned, Proc, RebalanceRun
from zkconsumer.errors import (
    ConsumerError,
    RebalanceFailedError,
    ZkConsumerError,
    ZooKeeperError,
)
from zkconsumer.zk.paths import BROKER_IDS, BROKER_TOPICS, consumer_id_path, topic_path

__all__ = ["close", "recover", "start", "start_rebalance"]

log = logging.getLogger(__name__)

S = MemberState


# -- start and registration --------------------------------------------------------------------

def start(m: Member) -> None:
    m._set_state(S.REGISTERING, "start")
    _register(m)
    if m.config.autocommit_enable:
        m.set_timer(TimerName.AUTOCOMMIT, m.now + m.config.autocommit_interval_ms / 1000.0)


def _register(m: Member) -> None:
    m.register_needed = True
    m.enqueue("register", lambda: ops.register(m), lambda _r, e: _registered(m, e), first=True)


def _registered(m: Member, error: ZkConsumerError | None) -> None:
    if error is not None:
        _fail(m, error, "registration failed")
        return
    m.register_needed = False
    cfg = m.config
    m.ensure_watch(f"/consumers/{cfg.group}/ids")
    m.ensure_watch(BROKER_IDS)
    if cfg.topic_count.is_wildcard:
        m.ensure_watch(BROKER_TOPICS)
    for topic, _ in cfg.topic_count.counts:
        m.ensure_watch(topic_path(topic))
    m.rearm_watches()  # after a session expiry: every watch died with the old session
    start_rebalance(m, "registered")


def _fail(m: Member, error: ZkConsumerError, what: str) -> None:
    """A failure retried after the backoff (FAILED); the first one ends `start`."""
    log.error("%s: %s (%s); retrying in %.1fs", m.config.consumer_id, what, error,
              m.config.backoff_s)
    m.rebalance = None
    m._set_state(S.FAILED, what)
    m.start_done(error)
    m.set_timer(TimerName.RETRY, m.now + m.config.backoff_s)


# -- rebalance ---------------------------------------------------------------------------------

def start_rebalance(m: Member, why: str) -> None:
    m.cancel_timer(TimerName.RETRY)
    m.rebalance = RebalanceRun(started=m.now)
    _begin_attempt(m, why)


def _begin_attempt(m: Member, why: str) -> None:
    rb = m.rebalance
    assert rb is not None
    rb.attempt += 1
    rb.total += 1
    m.want_rebalance = False
    m.stats.rebalance_attempts += 1
    m._set_state(S.REBALANCING, why)
    m.enqueue("rebalance", lambda: _attempt(m), lambda r, e: _attempt_done(m, r, e),
              first=True)


def _attempt(m: Member) -> Proc:
    """One attempt; returns the owner conflicts ([] = success)."""
    cfg = m.config
    id_path = consumer_id_path(cfg.group, cfg.consumer_id)
    reply = yield from ops.call(Exists(m.req(), id_path))
    if reply.error is not None:
        raise ops.failed(reply, "exists", id_path)
    if reply.stat is None:
        # Deleted behind our back (an admin tool removing the group) while our session
        # lives on: we are still a member, so register again.
        log.warning("%s vanished; registering again", id_path)
        yield from ops.register(m)
    yield from own.sweep_doubtful(m)
    view = yield from ops.read_view(m)
    for topic in view.my_threads:
        m.ensure_watch(topic_path(topic))
    # partitions of brokers missing from /brokers/ids cannot be fetched: not claimed
    decision = view.assignable(view.decide(), cfg.group, cfg.consumer_id)
    current = m.owned
    # a parked partition is claimed afresh: it re-reads its committed offset, which an
    # operator may have fixed
    keep = {k for k, o in current.items()
            if decision.get(k) == o.thread_id and o.parked is None}
    keep -= yield from own.verify(m, keep)
    revoke = [k for k in current if k not in keep]
    new = {k: t for k, t in decision.items() if k not in keep}
    if not revoke and not new:
        if not ops.fetchers_match(m, view.brokers):
            ops.start_fetchers(m, view.brokers)
        return []
    m.emit(StopFetchers())
    if revoke:
        yield from own.release(m, revoke)
    conflicts = (yield from own.claim(m, new)) if new else []
    if new and not conflicts:
        # before the fetchers start: a listener hears of a partition before any of its
        # messages can be handed out
        log.info("%s: claimed %s", cfg.consumer_id, ops.group_by_topic(new))
        m.emit(NotifyAssigned(ops.group_by_topic(new)))
    ops.start_fetchers(m, view.brokers)
    return conflicts


def _attempt_done(m: Member, conflicts: list[ops.Conflict] | None,
                  error: ZkConsumerError | None) -> None:
    rb = m.rebalance
    if rb is None:
        return
    cfg = m.config
    retries = cfg.rebalance_retries_max
    rb.conflicts = list(conflicts or [])
    rb.error = error
    if error is not None:
        log.warning("%s: rebalance attempt %d/%d failed: %s", cfg.consumer_id, rb.attempt,
                    retries, error)
    elif not rb.conflicts:
        m.stats.rebalances += 1
        m.stats.last_rebalance_duration = m.now - rb.started
        log.info("%s: rebalanced in %.3fs (attempt %d), owning %s", cfg.consumer_id,
                 m.now - rb.started, rb.total, ops.group_by_topic(m.owned))
        m.rebalance = None
        m._set_state(S.STABLE, "rebalanced")
        m.start_done(None)
        if m.doubtful:  # a release's delete had an unknown outcome: sweep it soon
            m.request_rebalance("owner znodes of unknown fate")
        return
    else:
        log.info("%s: rebalance attempt %d/%d: partitions still owned by others: %s",
                 cfg.consumer_id, rb.attempt, retries, describe(rb.conflicts))
    if rb.attempt >= retries or rb.total >= cfg.attempts_cap_factor * retries:
        m.stats.failed_rebalances += 1
        detail = (f"conflicting owners: {describe(rb.conflicts)}" if rb.conflicts
                  else f"last error: {error}")
        failure = RebalanceFailedError(f"{cfg.consumer_id} can't rebalance after "
                                       f"{rb.attempt} retries (group {cfg.group}; {detail})")
        failure.__cause__ = error
        _fail(m, failure, "rebalance failed")
        return
    m._set_state(S.BACKOFF, "conflicts" if rb.conflicts else "error")
    m.set_timer(TimerName.BACKOFF, m.now + cfg.backoff_s)
    rb.remaining = {path for path, _ in rb.conflicts}
    own.watch_conflicts(m, rb.remaining)
    if m.want_rebalance:  # the group changed during the attempt
        end_backoff(m, "group changed", counts=False)


def end_backoff(m: Member, why: str, *, counts: bool) -> None:
    """Start the next attempt now; ``counts`` False: this one is not a retry."""
    rb = m.rebalance
    if m.state is not S.BACKOFF or rb is None:
        return
    if not counts:
        rb.attempt -= 1
    rb.remaining = set()
    m.cancel_timer(TimerName.BACKOFF)
    _begin_attempt(m, why)


def owner_gone(m: Member, path: str, deleted: bool) -> None:
    """An exists-watch on a conflicting owner fired, or its first read answered."""
    rb = m.rebalance
    if m.state is not S.BACKOFF or rb is None or path not in rb.remaining:
        return
    if not deleted:
        return
    rb.remaining.discard(path)
    if not rb.remaining:
        end_backoff(m, "conflicting owners released", counts=True)


def describe(conflicts: list[ops.Conflict]) -> str:
    return ", ".join(f"{path}={value.decode('utf-8', 'replace') if value else None}"
                     for path, value in conflicts)


# -- timers ------------------------------------------------------------------------------------

def on_timer(m: Member, name: TimerName) -> None:
    cfg = m.config
    if name is TimerName.BACKOFF:
        end_backoff(m, "backoff over", counts=True)
    elif name is TimerName.RETRY and m.state is S.FAILED:
        if m.recover_needed:
            _recover(m)
        elif m.register_needed:
            m._set_state(S.REGISTERING, "retry registration")
            _register(m)
        else:
            start_rebalance(m, "retry after failure")
    elif name is TimerName.AUTOCOMMIT:
        m.set_timer(TimerName.AUTOCOMMIT, m.now + cfg.autocommit_interval_ms / 1000.0)
        if m.state is not S.SESSION_LOST and not m.autocommit_queued and m.owned:
            m.autocommit_queued = True
            m.enqueue("autocommit", lambda: own.commit(m),
                      lambda _r, _e: setattr(m, "autocommit_queued", False))
    elif name is TimerName.PARKED:
        if any(o.parked is not None for o in m.owned.values()):
            log.info("%s: retrying parked partition(s)", cfg.consumer_id)
            m.request_rebalance("parked partitions")
    elif name is TimerName.COMMIT_DEADLINE:
        _commit_deadlines(m)
    elif name is TimerName.CLOSE_DEADLINE and m.state is S.CLOSING:
        _finish_close(m, timed_out=True)


# -- commits and checks on request -------------------------------------------------------------

def _unwritten(m: Member) -> list[Owned]:
    return [o for o in m.owned.values()
            if o.parked is None and o.acked is not None and o.acked != o.committed]


def _log_late(m: Member) -> int:
    """Say which offsets a deadline left unwritten (with partition and offset); how many."""
    late = _unwritten(m)
    if late:
        log.error("offsets of %d partition(s) not committed in time (their next owner "
                  "re-reads from the stored offset): %s", len(late),
                  ", ".join(f"{o.topic}/{o.name}={o.acked}" for o in late))
    return len(late)


def commit_requested(m: Member, event: CommitRequested) -> None:
    m.commit_tokens[event.token] = event.deadline
    m.enqueue("commit", lambda: own.commit(m),
              lambda r, e: m.commit_done(event.token, r if e is None else len(_unwritten(m))))
    if event.deadline is not None:
        _arm_commit_deadline(m)


def _arm_commit_deadline(m: Member) -> None:
    deadlines = [d for d in m.commit_tokens.values() if d is not None]
    if deadlines:
        m.set_timer(TimerName.COMMIT_DEADLINE, min(deadlines))
    else:
        m.cancel_timer(TimerName.COMMIT_DEADLINE)


def _commit_deadlines(m: Member) -> None:
    due = [t for t, d in m.commit_tokens.items() if d is not None and d <= m.now]
    for token in due:
        m.commit_done(token, _log_late(m))
    _arm_commit_deadline(m)


def write_reset(m: Member, o: Owned, offset: int) -> None:
    """Persist an out-of-range reset at once (reference FetcherRunnable behaviour)."""
    def proc() -> Proc:
        if m.owned.get(o.key) is not o:
            return None
        if (yield from own.write_offset(m, o, offset, may_rewind=True)):
            o.committed = offset
            m.emit(RecordCommitted(o.topic, o.name, offset))
        return None

    def done(_r: Any, error: ZkConsumerError | None) -> None:
        if error is not None:
            log.warning("could not write reset offset of %s/%s: %s", o.topic, o.name, error)

    m.enqueue("reset", proc, done)


def check_requested(m: Member, event: AssignmentCheckRequested) -> None:
    if m.state is S.SESSION_LOST:
        m.check_done(event.token, (), ZooKeeperError("ZooKeeper session lost; cannot read "
                                                     "the group"))
        return
    m.check_tokens.add(event.token)

    def done(drift: Any, error: ZkConsumerError | None) -> None:
        m.check_tokens.discard(event.token)
        m.check_done(event.token, tuple(drift or ()), error)

    m.enqueue("check", lambda: _check(m), done)


def _check(m: Member) -> Proc:
    """Where what we own differs from the reference decision ZooKeeper shows now."""
    cfg = m.config
    view = yield from ops.read_view(m)
    decision = view.assignable(view.decide(), cfg.group, cfg.consumer_id)
    owned = {key: o.thread_id for key, o in m.owned.items()}
    drift = [f"{topic}/{name} is assigned to {thread} but not owned"
             for (topic, name), thread in sorted(decision.items())
             if owned.get((topic, name)) != thread]
    drift += [f"{topic}/{name} is owned but assigned to another member"
              for (topic, name) in sorted(owned) if (topic, name) not in decision]
    return drift


def arm_parked_timer(m: Member) -> None:
    if TimerName.PARKED not in m.timers:
        m.set_timer(TimerName.PARKED, m.now + m.config.parked_retry_s)


# -- session -----------------------------------------------------------------------------------

def recover(m: Member) -> None:
    """A new session replaced an expired one (state SESSION_LOST)."""
    m.stats.session_expirations += 1
    log.warning("%s: ZooKeeper session expired; releasing all partitions and rejoining",
                m.config.consumer_id)
    _recover(m)


def _recover(m: Member) -> None:
    m.recover_needed = True
    m._set_state(S.RECOVERING, "new session")
    m.enqueue("recover", lambda: _recovery(m), lambda _r, e: _recovered(m, e), first=True)


def _recovery(m: Member) -> Proc:
    """Release all (forward-only commit, the znodes died with the session), delete owner
    znodes retried onto the new session, resume delivery."""
    m.emit(StopFetchers())
    yield from own.release(m, list(m.owned), delete_owners=False, forward_only=True)
    yield from own.delete_leftovers(m)
    m.emit(ResumeDelivery())
    return None


def _recovered(m: Member, error: ZkConsumerError | None) -> None:
    if error is not None:
        _fail(m, error, "session recovery failed")
        return
    m.recover_needed = False
    m._set_state(S.REGISTERING, "recovered")
    _register(m)


# -- close -------------------------------------------------------------------------------------

def close(m: Member, deadline: float | None) -> None:
    """Leave the group now, from any state: abandon whatever runs, revoke, commit, close."""
    started = m.state is not S.INIT
    m.abort("close requested")
    m.queue.clear()
    for token in list(m.commit_tokens):
        m.commit_done(token, len(_unwritten(m)))
    for token in sorted(m.check_tokens):
        m.check_done(token, (), ConsumerError("the consumer is closing"))
    m.check_tokens.clear()
    for name in list(m.timers):
        m.cancel_timer(name)
    m.start_done(ConsumerError("the consumer was closed while starting"))
    m._set_state(S.CLOSING, "close requested")
    if deadline is not None:
        m.set_timer(TimerName.CLOSE_DEADLINE, deadline)
    m.enqueue("close", lambda: _closing(m, commit=started),
              lambda _r, _e: _finish_close(m, timed_out=False))


def _closing(m: Member, *, commit: bool) -> Proc:
    m.emit(StopFetchers())
    states = list(m.owned.values())
    if states:
        m.emit(RevokePartitions(tuple(o.key for o in states)))
        yield from own.notify_revoked(m, states)
    if commit and m.config.commit_on_close:
        if m.link is ConnState.LOST:
            log.warning("%s: ZooKeeper session lost: not committing at close (the next "
                        "owners resume from the stored offsets)", m.config.consumer_id)
        else:
            yield from own.commit(m)
    return None


def _finish_close(m: Member, *, timed_out: bool) -> None:
    if timed_out:
        _log_late(m)
        m.abort("close deadline")
    keys = tuple(m.owned)
    m.owned.clear()
    if keys:
        m.emit(DropPartitions(keys))
    m.cancel_timer(TimerName.CLOSE_DEADLINE)
    m.emit(CloseSession())
    m._set_state(S.CLOSED, "closed")
