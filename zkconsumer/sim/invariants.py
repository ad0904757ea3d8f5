"""The invariants, checked where the state they speak about changes (so after every step).

Stated precisely (docs/architecture.md, "Simulation", repeats them):

1. **Exclusive delivery** -- whenever a zkconsumer member hands a batch of partition *p* to
   its application, ZooKeeper holds *p*'s owner znode with one of that member's thread ids,
   ephemeral on the member's *current, live* session.  Owner znodes are unique, so two
   members never deliver *p* while both believe they own it.  The one allowed exception is
   the **zombie window**: the member's session has already expired but the member cannot
   know yet -- it was frozen (pause) or its connection had not reported the loss -- and the
   delivery happens at most `ZOMBIE_BOUND` seconds after the later of the expiry and the
   member's wake-up.  Scala members keep fetching while disconnected (REFERENCE §2.2), so
   their deliveries without ownership are counted (``scala_zombie``), not failed.  Nor may
   a zkconsumer member delete an owner znode held by another session (it would take the
   partition from its owner behind its back).  Scala's ``deletePath`` is unconditional and
   zkclient retries it across an expiry, so a Scala member can: counted
   (``scala_foreign_deletes``), the schedule is ``waived`` for 3 and 4, and the victim's
   deliveries until it notices count with ``scala_zombie``.
2. **Commit safety** -- every write of ``/consumers/G/offsets/T/B-P`` stores an offset *c*
   such that every message below *c* has been acknowledged by some application (for a
   Scala member, handed out by its iterator: what it commits).
3. **No loss** -- once faults stop, the producer stops and the group drains: every message
   of every partition acknowledged at least once and every committed offset equal to the
   log end -- unless a Scala member wrote that offset last: Scala's autocommit races its
   rebalance and can rewind the offset of a partition it no longer owns (REFERENCE §2.5);
   those partitions are counted (``scala_stale``), not failed.
4. **Liveness** -- within `LIVENESS_BOUND` seconds of the last fault: the readable ids
   znodes are exactly the live members (an unreadable one is garbage, no member); every
   partition's owner znode holds the thread the range assignment
   (`zkconsumer.consumer.assignment`) names over those members, ephemeral on that
   member's session; each member delivers exactly its assigned partitions; each holds
   a watch on ``/consumers/G/ids`` and on each subscribed topic (nobody is deaf).
5. **Nobody gives up** -- no zkconsumer member abandons the group.  A ``start()`` that
   raises is retried by the application with a new member, as ``zkconsumer run`` does, and
   counted (``start_failures``); with ``Spec.strict_start`` it counts as giving up.  Scala 0.7.2 does give up after ``rebalance.retries.max`` attempts
   under contention; a schedule where a Scala member gave up (it then stays registered
   owning nothing, or its application exits) cannot be expected to converge or drain
   (REFERENCE §2.2): it is counted as ``waived`` for 3 and 4.
6. **Duplicates** are counted (messages delivered again), not failed, with the longest
   time between a message's first delivery and its redelivery (``duplicate_age``): what a
   member had handed out but not committed when it lost the partition -- at most one
   autocommit interval of acknowledged messages plus those not yet acknowledged, unless
   ZooKeeper refused the commits (an outage), and redelivered once the next owner claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from zkconsumer.consumer.assignment import assign
from zkconsumer.consumer.member_events import Key
from zkconsumer.errors import ZnodeDataError
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.loop import Loop, Process
from zkconsumer.sim.world import Cluster, Feed
from zkconsumer.sim.zk import Node, ZooKeeper
from zkconsumer.zk.paths import (
    consumer_ids_path,
    offsets_path,
    owner_path,
    owners_path,
    parse_topic_count,
)

__all__ = ["LIVENESS_BOUND", "ZOMBIE_BOUND", "Checker", "Member"]

#: Seconds a member may deliver after its session expired and it could have noticed.
ZOMBIE_BOUND = 0.05
#: Seconds after the last fault within which the group must have converged.
LIVENESS_BOUND = 45.0


class Member(Protocol):
    """What the harness and the checker need of a simulated member (Scala or machine)."""

    kind: str
    consumer_id: str
    proc: Process
    client: ZkClient
    feed: Feed
    gave_up: int
    rebalances: int
    rebalance_ops: list[int]

    @property
    def alive(self) -> bool: ...

    def start(self) -> None: ...

    def kill(self) -> None: ...

    def terminate(self, deadline: float) -> None: ...

    def watches(self) -> list[str]: ...


class Checker:
    """Watches deliveries, acknowledgements and offset writes; judges the end state."""

    def __init__(self, loop: Loop, zk: ZooKeeper, cluster: Cluster, group: str) -> None:
        self.loop = loop
        self.zk = zk
        self.cluster = cluster
        self.group = group
        self.members: dict[str, Member] = {}
        self.violations: list[str] = []
        self.acked_to: dict[Key, int] = {}
        self._acked_gaps: dict[Key, list[tuple[int, int]]] = {}
        self.delivered_to: dict[Key, int] = {}
        self.duplicates = 0
        #: the longest time between a message's first delivery and a redelivery of it
        self.duplicate_age = 0.0
        self._batches: dict[Key, list[tuple[int, int, float]]] = {}
        self.zombie = 0
        self.scala_zombie = 0
        self.committed: dict[Key, int] = {}
        self.last_writer: dict[Key, str] = {}
        #: partitions whose final offset is stale because a Scala member wrote it last
        self.scala_stale: dict[Key, None] = {}
        self._offsets_prefix = offsets_path(group) + "/"
        self.scala_foreign_deletes = 0
        #: owner path -> the session whose znode a Scala member deleted (until re-created)
        self._scala_deleted: dict[str, int] = {}
        self._owners_prefix = owners_path(group) + "/"
        zk.on_write = self._written
        zk.on_delete = self._deleted

    def fail(self, invariant: str, detail: str) -> None:
        self.violations.append(f"t={self.loop.now:.4f} {invariant}: {detail}")
        self.loop.log("CHECK", f"VIOLATION {invariant}: {detail}")
        self.loop.halt()

    # -- 1 and 6: deliveries -------------------------------------------------------------------

    def delivered(self, member: str, key: Key, start: int, end: int) -> None:
        m = self.members[member]
        if self.loop.tracing:
            self.loop.log(member[-8:], f"deliver {key[0]}/{key[1]} [{start},{end})")
        path = owner_path(self.group, key[0], key[1])
        node = self.zk.nodes.get(path)
        session = m.client.session
        holds = (node is not None and session is not None and session.alive
                 and node.owner == session.id and node.data is not None
                 and node.data.decode().startswith(m.consumer_id + "-"))
        if not holds:
            if m.kind == "scala" or (node is None and session is not None
                                     and self._scala_deleted.get(path) == session.id):
                # a Scala zombie, or a member whose owner znode a Scala member deleted
                self.scala_zombie += end - start
            elif (session is not None and not session.alive and session.ended_at is not None
                  and self.loop.now - max(session.ended_at, m.proc.woke_at) <= ZOMBIE_BOUND):
                self.zombie += end - start
            else:
                owner = None if node is None else (node.data, node.owner)
                self.fail("exclusive delivery",
                          f"{member} delivered {key} [{start},{end}) without owning it "
                          f"(owner znode {owner}, session "
                          f"{None if session is None else (session.id, session.alive)})")
        hi = self.delivered_to.get(key, 0)
        batches = self._batches.setdefault(key, [])
        if start < hi:
            self.duplicates += min(end, hi) - start
            first = min((t for s, e, t in batches if s < min(end, hi) and e > start),
                        default=self.loop.now)
            self.duplicate_age = max(self.duplicate_age, self.loop.now - first)
        if end > hi:
            self.delivered_to[key] = end
            batches.append((max(start, hi), end, self.loop.now))
            committed = self.committed.get(key, 0)
            if len(batches) > 64 and batches[0][1] <= committed:
                self._batches[key] = [b for b in batches if b[1] > committed]

    def acked(self, key: Key, start: int, end: int) -> None:
        to = self.acked_to.get(key, 0)
        if start > to:
            self._acked_gaps.setdefault(key, []).append((start, end))
            return
        if end <= to:
            return
        to = end
        gaps = self._acked_gaps.get(key)
        if gaps:
            gaps.sort()
            while gaps and gaps[0][0] <= to:
                to = max(to, gaps.pop(0)[1])
        self.acked_to[key] = to

    def _deleted(self, path: str, node: Node) -> None:
        """Nobody deletes an owner znode held by another session: that takes a partition
        from its owner behind its back (and lets a third member claim it)."""
        writer = self.zk.writer
        if not path.startswith(self._owners_prefix) or not node.owner or node.owner == writer:
            return
        kind = self._kind_of(writer)
        if kind == "scala":
            # zkclient retries Scala's unconditional deletePath across an expiry
            self.scala_foreign_deletes += 1
            self._scala_deleted[path] = node.owner
        elif kind != "other":
            self.fail("exclusive delivery", f"session {writer:#x} deleted {path} of session "
                      f"{node.owner:#x} ({node.data!r})")

    # -- 2: commits ----------------------------------------------------------------------------

    def _written(self, path: str, data: bytes | None) -> None:
        if self._scala_deleted and path in self._scala_deleted:
            del self._scala_deleted[path]  # the owner path is in use again
        if not path.startswith(self._offsets_prefix):
            return
        rest = path[len(self._offsets_prefix):].split("/")
        if len(rest) != 2 or data is None:
            return
        key = (rest[0], rest[1])
        try:
            offset = int(data)
        except ValueError:
            return  # a garbage znode written by the fault injector
        self.committed[key] = offset
        self.last_writer[key] = self._kind_of(self.zk.writer)
        if self.loop.tracing:
            self.loop.log("zk", f"offset {key[0]}/{key[1]} = {offset}")
        if offset > self.acked_to.get(key, 0):
            self.fail("commit safety", f"{key} committed {offset} but only "
                      f"{self.acked_to.get(key, 0)} acknowledged")

    def _kind_of(self, sid: int) -> str:
        for m in self.members.values():
            if m.client.session is not None and m.client.session.id == sid:
                return m.kind
        return "other"

    # -- 3 and 4: the end state ----------------------------------------------------------------

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.alive]

    def converged(self, topics: Sequence[str]) -> str | None:
        """Why the group has not converged (liveness), or None if it has."""
        zk = self.zk
        ids_path = consumer_ids_path(self.group)
        ids_node = zk.nodes.get(ids_path)
        live = {m.consumer_id: m for m in self.live()}
        threads: dict[str, list[str]] = {}
        registered = []
        for cid in list(ids_node.children) if ids_node is not None else []:
            try:
                count = parse_topic_count(f"{ids_path}/{cid}", zk.nodes[f"{ids_path}/{cid}"].data)
            except ZnodeDataError:
                continue  # garbage: no member, no threads (what zkconsumer members make of it)
            registered.append(cid)
            for topic, tids in count.thread_ids_per_topic(cid).items():
                threads.setdefault(topic, []).extend(tids)
        if sorted(registered) != sorted(live):
            return f"registered {sorted(registered)} != live {sorted(live)}"
        expected: dict[str, list[Key]] = {cid: [] for cid in live}
        for topic in topics:
            parts = [k[1] for k in self.cluster.ends if k[0] == topic]
            if not parts:
                continue
            for part, tid in assign(parts, threads.get(topic, ()), threads.get(topic, ())).items():
                cid = tid.rsplit("-", 1)[0]
                owner = zk.nodes.get(owner_path(self.group, topic, part))
                session = live[cid].client.session
                if (owner is None or owner.data != tid.encode() or session is None
                        or owner.owner != session.id):
                    held = None if owner is None else owner.data
                    return f"{topic}/{part}: owner {held!r}, assignment says {tid}"
                expected[cid].append((topic, part))
        for cid, member in live.items():
            if sorted(member.feed.active()) != sorted(expected[cid]):
                return f"{cid} delivers {sorted(member.feed.active())}, owns {expected[cid]}"
            session = member.client.session
            for path in member.watches():
                if session is None or not zk.watched(session.id, path):
                    return f"{cid} is deaf: no watch on {path}"
        return None

    def drained(self) -> str | None:
        """Why not every message is acknowledged and committed (no loss), or None."""
        for key, end in self.cluster.ends.items():
            if self.acked_to.get(key, 0) < end:
                return f"{key}: acknowledged {self.acked_to.get(key, 0)} of {end}"
            if self.committed.get(key, 0) != end:
                if self.last_writer.get(key) == "scala":
                    # Scala's autocommit races its rebalance and rewrites offsets of
                    # partitions it no longer owns (REFERENCE §2.5): not ours to fix.
                    self.scala_stale[key] = None
                    continue
                return f"{key}: committed {self.committed.get(key, 0)}, log end {end}"
        return None
