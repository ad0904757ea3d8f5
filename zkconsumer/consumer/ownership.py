"""`Ownership`: the partitions this member owns -- owner znodes, fetchers, acks and commits.

The coordinator decides; this module carries decisions out in the one order that keeps the
group safe when Scala members share it (REFERENCE §2.4, §6.2, §6.4):

* **release** = stop fetching and drop queued chunks (`Delivery.revoke`), tell the listeners
  (``on_revoked``: last chance to ack), **commit**, mark the states released, and only then
  delete the owner znodes -- so the next owner resumes exactly after the last acknowledged
  message.  Only owner znodes that still hold *our* thread id are deleted (KAFKA-262);
* **claim** is all or nothing: owner znodes are created in sorted order and the first
  conflict (a znode holding another value) rolls back every znode created by this call.
  Identical data owned by our own session counts as ours (a create retried after a lost
  answer), as ``createEphemeralPathExpectConflict`` does;
* offsets of newly claimed partitions are read *after* the claim succeeded, so they include
  the previous owner's final commit (Scala reads them before claiming and may replay more).

Commits (`commit`) write only offsets that changed since the last write (Scala rewrites every
owned partition each time; unchanged offsets only load ZooKeeper).  Every commit is a
compare-and-set on the offset znode's version (`commit_offset_cas`), the version remembered
from the claim or our last write, and **never moves a stored offset backwards unless this
member still owns the partition on the session it claimed it in** (owner znode with our thread
id, ephemeral on our current session, same session as at the claim).  So a commit that
ZooKeeper retries late -- started before our session expired, landing after a new owner
advanced the offset -- finds a new version, re-reads, and leaves the new owner's offset alone.
A Scala member's unversioned write only bumps the version: we re-read and, owning the
partition, write ours as before.  They are serialised with
releases by ``_commit_lock``, which fixes the reference race where the autocommit thread
could write the offset of a partition being released -- and possibly already re-owned.
Acks take the short ``_ack_lock`` only, never a ZooKeeper call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.delivery import Delivery, FetchHandle
from zkconsumer.consumer.fetcher import Fetcher
from zkconsumer.consumer.message import ConsumerStats, Message, PartitionState
from zkconsumer.errors import ZkConsumerError, ZnodeDataError, ZooKeeperError
from zkconsumer.zk.offsets import commit_offset_cas, read_offset_versioned
from zkconsumer.zk.paths import (
    BrokerInfo,
    owner_path,
    owners_path,
    owners_topic_path,
    parse_partition_name,
)
from zkconsumer.zk.session import ZkSession

__all__ = ["Conflict", "Ownership", "group_by_topic"]

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (topic, "B-P")
#: (owner path, value found there or None if it vanished meanwhile)
Conflict = tuple[str, bytes | None]


class _CommitMark:
    """What a commit compares against: the claim's session and the offset znode version we
    last read (at the claim) or wrote (``None``: unknown, read before writing)."""

    __slots__ = ("session_id", "state", "version")

    def __init__(self, state: PartitionState, session_id: int | None,
                 version: int | None) -> None:
        self.state = state
        self.session_id = session_id
        self.version = version


def group_by_topic(keys: Iterable[Key]) -> dict[str, list[str]]:
    """``[(topic, "B-P"), ...]`` -> ``{topic: sorted ["B-P", ...]}``."""
    out: dict[str, list[str]] = defaultdict(list)
    for topic, name in keys:
        out[topic].append(name)
    return {t: sorted(v) for t, v in sorted(out.items())}


class Ownership:
    """Registry of owned partitions and the machinery around them (see module docstring)."""

    def __init__(self, session: ZkSession, config: ConsumerConfig, consumer_id: str,
                 delivery: Delivery, stats: ConsumerStats,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.session = session
        self.config = config
        self.group = config.group_id
        self.consumer_id = consumer_id
        self.delivery = delivery
        self.stats = stats
        self._clock = clock
        self._states: dict[Key, PartitionState] = {}
        self._fetchers: list[Fetcher] = []
        self._stopped_fetchers: list[Fetcher] = []
        self._brokers: dict[int, BrokerInfo] = {}
        self._marks: dict[Key, _CommitMark] = {}  # guarded by _commit_lock
        self._commit_lock = threading.RLock()
        self._ack_lock = threading.Lock()

    # -- reads ---------------------------------------------------------------------------------

    def states(self) -> dict[Key, PartitionState]:
        """A snapshot (the registry changes on the coordinator thread)."""
        with self._ack_lock:
            return dict(self._states)

    def owned(self) -> dict[str, list[str]]:
        return group_by_topic(self.states())

    # -- acks and commits ----------------------------------------------------------------------

    def ack(self, message: Message) -> bool:
        """Acknowledge ``message`` and every earlier one of its partition; False if stale."""
        state = message._state
        if state is None:
            return False
        with self._ack_lock:
            if state.released:
                return False
            if state.acked_offset is None or message.next_offset > state.acked_offset:
                state.acked_offset = message.next_offset
            return True

    def commit(self, states: Iterable[PartitionState] | None = None, *,
               forward_only: bool = False, timeout: float | None = None) -> int:
        """Write changed acknowledged offsets; returns the number of failed writes.

        With a ``timeout`` (seconds) every partition is written at once, each in its own
        thread, and the call returns within it whatever ZooKeeper does: a hung
        ZooKeeper costs one operation timeout *in total*, not one per partition, which is
        what lets a shutdown keep its ``--shutdown-timeout``.  A write still running then is
        counted as failed and logged with its offset (the partition's next owner replays
        from the stored one: nothing is lost, a little is re-read); it may still land.

        ``forward_only`` is used after a session loss, when our owner znodes are gone and
        another member may already own the partition: we then write our acknowledged offset
        only if it is *ahead* of the stored one.  That can never lose a message (everything
        before it was acknowledged by our application) and never rewinds a new owner that
        already committed further; it spares the next owner replaying what we processed.
        The same check guards the first write of a position that did not come from
        ZooKeeper (an ``autooffset.reset`` start): if someone stored an offset at or beyond
        it meanwhile -- a member that lost its session committing late -- we keep theirs.
        """
        with self._commit_lock:
            todo: list[tuple[PartitionState, int]] = []
            with self._ack_lock:
                for state in (self._states.values() if states is None else states):
                    value = state.acked_offset
                    if not state.released and value is not None and value != state.committed_offset:
                        todo.append((state, value))
            if not todo:
                return 0
            started = self._clock()
            if timeout is None:
                failures = sum(not self._commit_one(state, value, forward_only)
                               for state, value in todo)
            else:
                failures = self._commit_concurrently(todo, forward_only, started + timeout)
            self.stats.commits += 1
            self.stats.commit_failures += failures
            self.stats.last_commit_latency = self._clock() - started
            return failures

    def _commit_one(self, state: PartitionState, value: int, forward_only: bool) -> bool:
        """Write one partition's offset; False if that failed (logged)."""
        try:
            rewind = not forward_only and state.committed_offset is not None
            if not self._write_offset(state, value, may_rewind=rewind):
                return True  # a stored offset ahead of ours was kept: nothing to retry
            log.debug("committed %s/%s = %s", state.topic, state.name, value)
            state.committed_offset = value
            self.stats.offsets_written += 1
            return True
        except ZkConsumerError as exc:
            log.warning("could not commit offset %s of %s/%s: %s", value, state.topic,
                        state.name, exc)
            return False

    def _commit_concurrently(self, todo: list[tuple[PartitionState, int]], forward_only: bool,
                             deadline: float) -> int:
        """`_commit_one` for every partition at once; failures (and writes still running
        at ``deadline``) are counted and logged."""
        results: dict[int, bool] = {}
        done = threading.Condition()

        def write(i: int, state: PartitionState, value: int) -> None:
            ok = self._commit_one(state, value, forward_only)
            with done:
                results[i] = ok
                done.notify_all()

        for i, (state, value) in enumerate(todo):
            # daemon threads: a write stuck in a hung ZooKeeper must not keep the process
            threading.Thread(target=write, args=(i, state, value), daemon=True,
                             name=f"commit-{state.topic}-{state.name}").start()
        with done:
            done.wait_for(lambda: len(results) == len(todo),
                          max(0.0, deadline - self._clock()))
            finished = dict(results)
        late = [f"{state.topic}/{state.name}={value}"
                for i, (state, value) in enumerate(todo) if i not in finished]
        if late:
            log.error("offsets of %d partition(s) not committed in time (their next owner "
                      "re-reads from the stored offset): %s", len(late), ", ".join(late))
        return len(late) + sum(not ok for ok in finished.values())

    def _write_offset(self, state: PartitionState, value: int, *, may_rewind: bool) -> bool:
        """Compare-and-set ``value``; False if a stored offset ahead of it was kept.

        ``may_rewind`` False: write only if ahead of the stored offset (after a session loss,
        or the first write of an ``autooffset.reset`` position).  True: a stored offset ahead
        of ours (someone else wrote) is overwritten only if we still own the partition on
        the session we claimed it in (`_owns_now`).
        """
        mark = self._marks.get(state.key)
        if mark is not None and mark.state is not state:
            mark = None  # a newer claim of the same partition (cannot happen under the lock)

        def allowed(stored: int) -> bool:
            if not (may_rewind and mark is not None and self._owns_now(state, mark)):
                return False
            log.warning("%s/%s: offset %s was written by someone else while we own the "
                        "partition; writing ours (%s) over it", state.topic, state.name,
                        stored, value)
            return True

        # Without rewinds, read first even when the version is known: one extra read, only
        # after a session loss, and the decision never depends on what we believe was stored.
        version = mark.version if mark is not None and may_rewind else None
        result = commit_offset_cas(self.session, self.group, state.topic, state.name, value,
                                   version=version, may_rewind=allowed)
        if mark is not None:
            mark.version = result.version
        if not result.written:
            log.info("not committing %s/%s at %s: %s is stored and we %s", state.topic,
                     state.name, value, result.stored,
                     "may not move it back" if may_rewind else "only move it forward now")
        return result.written

    def _owns_now(self, state: PartitionState, mark: _CommitMark) -> bool:
        """Our current session is the claim's session and still holds our owner znode."""
        sid = self.session.session_id
        if state.released or sid is None or sid != mark.session_id:
            return False
        node = self.session.get_node(owner_path(self.group, state.topic, state.name))
        return (node is not None and node.data == state.thread_id.encode()
                and node.ephemeral_owner == sid)

    def write_reset(self, state: PartitionState, offset: int) -> None:
        """Persist an out-of-range reset at once (reference FetcherRunnable behaviour)."""
        with self._commit_lock:
            if state.released:
                return
            if self._write_offset(state, offset, may_rewind=True):
                state.committed_offset = offset

    # -- fetchers ------------------------------------------------------------------------------

    def stop_fetchers(self) -> None:
        """Invalidate every fetcher at once (they exit on their own; nothing they fetch counts)."""
        fetchers, self._fetchers = self._fetchers, []
        self.delivery.stop([f.handle for f in fetchers])
        for f in fetchers:
            f.stop()
        self._stopped_fetchers = [f for f in self._stopped_fetchers + fetchers if f.alive]

    def start_fetchers(self, brokers: Mapping[int, BrokerInfo]) -> None:
        """One fetcher per broker for the active, healthy partitions we own."""
        self.stop_fetchers()
        self._brokers = dict(brokers)
        per_broker: dict[int, list[PartitionState]] = defaultdict(list)
        for state in self.states().values():
            if state.active and state.error is None:
                per_broker[state.broker_id].append(state)
        cfg = self.config
        for bid, states in sorted(per_broker.items()):
            broker = brokers.get(bid)
            if broker is None:  # checked by the coordinator; stay defensive
                log.warning("broker %s is not registered; its partitions wait for the next "
                            "rebalance", bid)
                continue
            fetcher = Fetcher(
                broker, states, self.delivery, reset_policy=cfg.autooffset_reset,
                fetch_size=cfg.fetch_size, max_fetch_size=cfg.max_fetch_size,
                backoff_s=cfg.fetcher_backoff_ms / 1000.0,
                socket_timeout_s=cfg.socket_timeout_ms / 1000.0,
                buffer_size=cfg.socket_buffersize, on_reset=self.write_reset, group=self.group,
                name=f"{self.consumer_id}-fetcher-{bid}")
            self._fetchers.append(fetcher)
            fetcher.start()

    def fetchers_match(self, brokers: Mapping[int, BrokerInfo]) -> bool:
        """True if the running fetchers use the current addresses of their brokers."""
        return all(brokers.get(f.broker.id) == f.broker and f.alive for f in self._fetchers)

    def join_fetchers(self, timeout: float) -> None:
        deadline = self._clock() + timeout
        for f in self._stopped_fetchers + self._fetchers:
            f.join(max(0.0, deadline - self._clock()))

    # -- release and claim ---------------------------------------------------------------------

    def release(self, keys: Iterable[Key], on_revoked: Callable[[dict[str, list[str]]], None],
                *, delete_owners: bool = True, forward_only: bool = False) -> None:
        """Revoke partitions in the safe order: stop, notify, commit, forget, delete znodes.

        Fetchers must already be stopped (`stop_fetchers`) by the caller.  ``delete_owners``
        is False after a session loss (the znodes died with the session).
        """
        current = self.states()
        states = [current[k] for k in keys if k in current]
        if not states:
            return
        self.delivery.revoke(states)
        on_revoked(group_by_topic(s.key for s in states))
        with self._commit_lock:
            self.commit(states, forward_only=forward_only)
            with self._ack_lock:
                for state in states:
                    state.released = True
                    self._states.pop(state.key, None)
            for state in states:
                self._marks.pop(state.key, None)
        if delete_owners:
            for state in states:
                self._delete_owner(state)

    def _delete_owner(self, state: PartitionState) -> None:
        path = owner_path(self.group, state.topic, state.name)
        try:
            self._delete_if_ours(path, state.thread_id.encode())
        except ZkConsumerError as exc:
            log.warning("could not release %s: %s", path, exc)

    def _delete_if_ours(self, path: str, value: bytes) -> bool:
        """Delete an owner znode only if it holds ``value`` *and* belongs to our current
        session.  The value alone is not enough: after a session expiry another member may
        already hold the partition, and only the session tells our znode from a new one."""
        node = self.session.get_node(path)
        if node is None:
            return False
        sid = self.session.session_id
        if node.data != value or sid is None or node.ephemeral_owner != sid:
            log.warning("not deleting %s: it holds %r of session 0x%x, not our %r of 0x%x",
                        path, node.data, node.ephemeral_owner, value, sid or 0)
            return False
        self.session.delete(path)
        return True

    def delete_session_leftovers(self) -> list[str]:
        """Delete every owner znode of the group held by our current session; returns them.

        Called after a session expiry, once every partition was released and before we
        register again, when we legitimately own nothing.  An owner-znode create that was in
        flight when the old session died is retried by the session layer (kazoo reports
        ConnectionLoss for a request whose outcome is unknown) and may land on the *new*
        session: it then carries our thread id but no state of ours, so no release would
        ever delete it, and the member the next rebalance gives that partition to could
        never claim it (a Scala member gives up after its retries: never consumed).
        """
        sid = self.session.session_id
        if sid is None:
            raise ZooKeeperError("no ZooKeeper session: cannot look for leftover owner znodes")
        deleted = []
        with self._ack_lock:
            tracked = set(self._states)
        for topic in self.session.get_children(owners_path(self.group)):
            for name in self.session.get_children(owners_topic_path(self.group, topic)):
                path = owner_path(self.group, topic, name)
                node = self.session.get_node(path)
                if node is None or node.ephemeral_owner != sid or (topic, name) in tracked:
                    continue
                log.warning("deleting %s = %r: created on our new session by a request "
                            "retried across the session expiry", path, node.data)
                self.session.delete(path)
                deleted.append(path)
        return deleted

    def verify(self, keys: Iterable[Key]) -> list[Key]:
        """Keys whose owner znode no longer holds our thread id (lost behind our back)."""
        lost = []
        current = self.states()
        for key in keys:
            state = current.get(key)
            if state is None:
                continue
            holder = self.session.get(owner_path(self.group, key[0], key[1]))
            if holder != state.thread_id.encode():
                log.warning("owner znode of %s/%s holds %r, expected %r", key[0], key[1],
                            holder, state.thread_id)
                lost.append(key)
        return lost

    def claim(self, wanted: Mapping[Key, str]) -> list[Conflict]:
        """Create every owner znode of ``wanted`` or none; return the conflicts found.

        On success, creates the partition states (offsets read from ZooKeeper now; a missing
        offset leaves the fetch offset unknown for the fetcher to resolve by
        ``autooffset.reset``).  Does not start fetchers.
        """
        created: list[tuple[str, bytes]] = []
        conflicts: list[Conflict] = []
        items = sorted(wanted.items())
        claim_session = self.session.session_id  # the owner znodes live on this session
        try:
            for i, ((topic, name), thread) in enumerate(items):
                path = owner_path(self.group, topic, name)
                if self.session.create_ephemeral_expect_conflict(path, thread.encode()):
                    created.append((path, thread.encode()))
                    continue
                conflicts.append((path, self.session.get(path)))
                # Fail fast (fewer znodes to roll back, less disturbance to the others), but
                # report every conflicting owner we can see, for the error message.
                for (t2, n2), th2 in items[i + 1:]:
                    p2 = owner_path(self.group, t2, n2)
                    held = self.session.get(p2)
                    if held is not None and held != th2.encode():
                        conflicts.append((p2, held))
                break
        except ZkConsumerError:
            self._rollback(created)
            raise
        if conflicts:
            self._rollback(created)
            return conflicts
        try:
            new = [self._new_state(topic, name, thread) for (topic, name), thread in items]
        except ZkConsumerError:
            self._rollback(created)
            raise
        with self._commit_lock:
            for state, version in new:
                self._marks[state.key] = _CommitMark(state, claim_session, version)
            with self._ack_lock:
                for state, _ in new:
                    self._states[state.key] = state
        for state, _ in new:
            if state.error is not None:  # parked at the claim (unreadable committed offset)
                log.error("not fetching %s/%s: %s", state.topic, state.name, state.error)
                self.delivery.put_error(FetchHandle(), state, state.error)
        return []

    def _rollback(self, created: list[tuple[str, bytes]]) -> None:
        for path, value in created:
            try:
                self._delete_if_ours(path, value)
            except ZkConsumerError as exc:
                log.warning("could not roll back owner znode %s: %s", path, exc)

    def _new_state(self, topic: str, name: str,
                   thread: str) -> tuple[PartitionState, int | None]:
        """The state of a just-claimed partition and its offset znode version.

        An unreadable committed offset (``abc``, ``-5``, ``1.5``, beyond 2**63-1, empty)
        parks only this partition: the state carries the error (no fetcher takes it, the
        application gets the error once from poll) and nothing is ever committed for it,
        so the bad value stays for an operator to see and fix.  Every other partition of
        the claim goes ahead -- before, the claim failed as a whole, on every rebalance.
        """
        broker, part = parse_partition_name(name)
        try:
            offset, version = read_offset_versioned(self.session, self.group, topic, name)
        except ZnodeDataError as exc:
            why = str(exc).rsplit(" [znode ", 1)[0]  # the new error names path and value
            state = PartitionState(topic, broker, part, thread, None, None,
                                   self.config.fetch_size)
            state.error = ZnodeDataError(
                f"committed offset of {topic}/{name} is unreadable, the partition is parked "
                f"(the others are consumed); set it with `zkconsumer offsets reset --zk ZK "
                f"--group {self.group} --topic {topic} --to earliest|latest|FILE` (stop the "
                f"group's members first or add --force): {why}", path=exc.path, data=exc.data)
            return state, None
        return (PartitionState(topic, broker, part, thread, offset, offset,
                               self.config.fetch_size), version)

    def drop_all_states(self) -> list[PartitionState]:
        """Forget every state without committing (used at close after the final commit)."""
        with self._ack_lock:
            states = list(self._states.values())
            for s in states:
                s.active = False
                s.released = True
            self._states.clear()
        with self._commit_lock:
            self._marks.clear()
        return states
