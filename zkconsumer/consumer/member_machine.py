"""`MemberMachine`: one consumer-group member as a pure state machine.

``handle(event, now) -> list[Command]``: events and commands are the values of
`zkconsumer.consumer.member_events` and `zkconsumer.consumer.member_commands` (whose
docstrings are the executor's manual); states, the transition table and the configuration
are in `zkconsumer.consumer.member_state`.  No
threads, no clock, no I/O, no kazoo: the production driver (`member_driver`) and the
simulator (`zkconsumer.sim`) run this same code.

Construct and start::

    machine = MemberMachine(MemberConfig(group="g", consumer_id="g_h-1",
                                         topic_count=TopicCount.static({"t": 1})))
    commands = machine.handle(Start(session_id=0x1234), now=0.0)

How it works.  Multi-step ZooKeeper work (register, one rebalance attempt, a commit, the
recovery after an expiry, the final commit at close) runs as a *procedure*: a generator
(flows in `member_procs`, ZooKeeper steps in `member_zkops` and `member_ownership`) that
yields a batch of commands and receives the replies to the ones that carry a ``req`` once
all of them arrived.  At most one procedure runs at a time; the others
wait in a queue, in order.  That gives the member the serialisation the old locks gave
(a commit never interleaves with the release of the same partition) without a lock.  A
close or a session loss abandons the running procedure at once (its late replies are
ignored), which is what makes close immediate in every state: nothing waits for a backoff,
a retry or a ZooKeeper answer that no longer matters.  (A commit or check someone waits for
is queued again instead; after a recovery it answers.)

Rules kept from the reference and our fixes (REFERENCE §2.1-2.4, §6): registration as Scala
writes it; watches on the ids, /brokers/ids, every topic of ours (missing ones too) and
/brokers/topics for wildcards; release = revoke, on_revoked, commit, forget, delete owner
znodes that still hold our thread id on our session; claim all-or-nothing in sorted order;
retries with backoff that ends early once conflicting owners are deleted or the group
changes; commits by compare-and-set that never rewind an offset unless we own the partition
on the session we claimed it in; after an expiry, a forward-only commit of what we
processed and the deletion of owner znodes a retried request created on the new session;
an owner znode whose create or delete had an unknown outcome (CONNECTION_LOSS, or a create
still in flight when its procedure was abandoned -- the session layer may apply it later,
even on a new session) is deleted before the next claim if it is still ours and not owned
("doubtful"); after any StopFetchers the next successful attempt starts the fetchers again.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zkconsumer.consumer import member_procs as procs
from zkconsumer.consumer.member_commands import (
    AssignmentChecked,
    CancelTimer,
    Command,
    CommitDone,
    Create,
    GetChildren,
    NotifyState,
    PauseDelivery,
    ReportHealth,
    ResumeDelivery,
    SetTimer,
    StartDone,
    StopFetchers,
)
from zkconsumer.consumer.member_events import (
    Acked,
    AssignmentCheckRequested,
    CloseRequested,
    CommitRequested,
    Connection,
    ConnState,
    Done,
    Event,
    FetcherParked,
    Key,
    OffsetReset,
    RebalanceRequested,
    Start,
    TimerFired,
    TimerName,
    WatchFired,
    WatchKind,
    ZkError,
    ZkReply,
)
from zkconsumer.consumer.member_state import (
    PUBLIC_STATE,
    MemberConfig,
    MemberState,
    Owned,
    Proc,
    RebalanceRun,
    check_transition,
)
from zkconsumer.consumer.member_zkops import awaited
from zkconsumer.consumer.message import ConsumerStats
from zkconsumer.errors import LocalProtocolError, ZkConsumerError
from zkconsumer.zk.paths import BrokerInfo, owners_path

__all__ = ["MemberMachine"]

log = logging.getLogger(__name__)

S = MemberState

#: Procedures that are steps of the member's flow (restarted by state, never re-queued).
_FLOWS = frozenset({"rebalance", "register", "recover"})


@dataclass(slots=True)
class _Running:
    name: str
    factory: Callable[[], Proc]
    gen: Proc
    on_done: Callable[[Any, ZkConsumerError | None], None]
    waiting: set[Any] = field(default_factory=set)
    replies: dict[Any, Any] = field(default_factory=dict)


class MemberMachine:
    """See the module docstring.  Create one per member; feed it events from one thread.

    Read-only for executors and tests: ``state``, ``public_state`` (the last string reported
    to ``on_state``), ``link``, ``session_id``, ``owned``, ``watches_armed``, ``stats`` and
    ``transitions`` (every state change, for traces).
    """

    def __init__(self, config: MemberConfig, stats: ConsumerStats | None = None) -> None:
        self.config = config
        self.stats = stats if stats is not None else ConsumerStats()
        self.state = MemberState.INIT
        self.public_state = "STARTING"
        self.link = ConnState.CONNECTED
        self.session_id: int | None = None
        self.now = 0.0
        self.owned: dict[Key, Owned] = {}
        self.transitions: list[tuple[MemberState, MemberState, str]] = []
        # -- used by member_procs / member_zkops (the machine's own modules) --
        self.queue: deque[tuple[str, Callable[[], Proc],
                                Callable[[Any, ZkConsumerError | None], None]]] = deque()
        self.timers: dict[TimerName, float] = {}
        self.rebalance: RebalanceRun | None = None
        self.want_rebalance = False
        self.register_needed = False
        self.recover_needed = False
        self.autocommit_queued = False
        self.commit_tokens: dict[int, float | None] = {}
        self.check_tokens: set[int] = set()
        self.exists_reqs: dict[int, str] = {}  # req -> conflicting owner path
        #: owner znodes whose create/delete outcome is unknown: (path, our value)
        self.doubtful: set[tuple[str, bytes]] = set()
        #: brokers the running fetchers use (by id); None: fetchers stopped (initially, and
        #: after every StopFetchers) -- the next successful attempt starts them (F5)
        self.fetch_brokers: dict[int, BrokerInfo] | None = None
        #: owner-znode creates in flight: req -> (path, our value)
        self._owner_creates: dict[int, tuple[str, bytes]] = {}
        #: those of an abandoned procedure: still retried by the session layer (possibly
        #: onto a new session), so their znode becomes doubtful when they are answered
        self._orphan_creates: dict[int, tuple[str, bytes]] = {}
        self._out: list[Command] = []
        self._next_req = 0
        self._proc: _Running | None = None
        self._start_pending = False  # StartDone not sent yet
        self._watches: dict[str, bool] = {}  # path -> armed on the current connection
        self._watch_reqs: dict[int, tuple[str, int]] = {}  # req -> (path, epoch)
        self._epoch = 0
        self._health: bool | None = None

    # -- the entry point -----------------------------------------------------------------------

    def handle(self, event: Event, now: float) -> list[Command]:
        """Feed one event; returns the commands to execute, in order."""
        if now < self.now:
            raise LocalProtocolError(f"time went backwards: {now} < {self.now}")
        self.now = now
        self._out = []
        if self.state is S.CLOSED:
            return []
        if self.state is S.INIT and not isinstance(event, (Start, CloseRequested)):
            if isinstance(event, Connection):
                return []  # connection changes before Start: nothing to do yet
            raise LocalProtocolError(f"event {event!r} before Start")
        getattr(self, "_on_" + type(event).__name__)(event)
        self._pump()
        self._report_health()
        out, self._out = self._out, []
        return out

    # -- state ---------------------------------------------------------------------------------

    def _set_state(self, new: MemberState, reason: str) -> None:
        """The only writer of ``state``: validates against the table and logs the move."""
        old = self.state
        check_transition(old, new, reason)
        self.state = new
        self.transitions.append((old, new, reason))
        log.info("%s: %s -> %s (%s)", self.config.consumer_id, old.name, new.name, reason)
        public = PUBLIC_STATE[new]
        if new is S.REBALANCING and old in (S.BACKOFF, S.REBALANCING):
            public = None  # the same rebalance, next attempt
        if public is not None:
            self.notify_state(public)

    def notify_state(self, public: str) -> None:
        self.public_state = public
        self._out.append(NotifyState(public))

    # -- output helpers used by the procedures -------------------------------------------------

    def req(self) -> int:
        self._next_req += 1
        return self._next_req

    def emit(self, *commands: Command) -> None:
        """Queue commands for the executor; a StopFetchers marks the fetchers stopped, so
        whichever procedure emitted it, the next successful attempt restarts them."""
        owners = owners_path(self.config.group) + "/"
        for c in commands:
            if isinstance(c, StopFetchers):
                self.fetch_brokers = None
            elif isinstance(c, Create) and c.path.startswith(owners):
                self._owner_creates[c.req] = (c.path, c.data or b"")
        self._out.extend(commands)

    def set_timer(self, name: TimerName, at: float) -> None:
        self.timers[name] = at
        self._out.append(SetTimer(name, at))

    def cancel_timer(self, name: TimerName) -> None:
        if self.timers.pop(name, None) is not None:
            self._out.append(CancelTimer(name))

    def arm_parked_timer(self) -> None:
        procs.arm_parked_timer(self)

    # -- procedures ----------------------------------------------------------------------------

    def enqueue(self, name: str, factory: Callable[[], Proc],
                on_done: Callable[[Any, ZkConsumerError | None], None], *,
                first: bool = False) -> None:
        """Run ``factory()`` once nothing else runs (``first``: before what is queued)."""
        item = (name, factory, on_done)
        if first:
            self.queue.appendleft(item)
        else:
            self.queue.append(item)

    def _pump(self) -> None:
        """Start queued procedures (and a wanted rebalance) while nothing runs."""
        while self._proc is None and self.state not in (S.SESSION_LOST, S.CLOSED):
            if self.queue:
                name, factory, on_done = self.queue.popleft()
                self._proc = _Running(name, factory, factory(), on_done)
                self._advance(None)
            elif self.want_rebalance and (self.state is S.STABLE or (
                    self.state is S.FAILED and not self.register_needed
                    and not self.recover_needed)):
                procs.start_rebalance(self, "requested")
            else:
                break

    def _advance(self, value: dict[Any, Any] | None) -> None:
        running = self._proc
        assert running is not None
        while True:
            try:
                batch = running.gen.send(value)  # type: ignore[arg-type]
            except StopIteration as stop:
                self._finish(running, stop.value, None)
                return
            except ZkConsumerError as exc:
                self._finish(running, None, exc)
                return
            for command in batch:
                if isinstance(command, SetTimer):
                    self.timers[command.name] = command.at
            self.emit(*batch)
            waiting = awaited(batch)
            if waiting:
                running.waiting = waiting
                running.replies = {}
                return
            value = {}

    def _finish(self, running: _Running, result: Any, error: ZkConsumerError | None) -> None:
        if self._proc is running:
            self._proc = None
        running.on_done(result, error)

    def _deliver(self, key: Any, reply: Any) -> bool:
        """Hand a reply (or a fired procedure timer) to the running procedure; False if
        nothing waits for it (stale: the procedure was abandoned)."""
        running = self._proc
        if running is None or key not in running.waiting:
            return False
        running.waiting.discard(key)
        running.replies[key] = reply
        if not running.waiting:
            self._advance(running.replies)
        return True

    def abort(self, why: str) -> None:
        """Abandon the running procedure and the rebalance (close, session loss).

        A commit or check someone waits for is queued again from the start (after a
        session recovery it finds the partitions released and answers); the flows
        (register, rebalance, recover) are restarted by whoever aborts."""
        running, self._proc = self._proc, None
        if running is not None:
            log.info("%s: abandoning %s (%s)", self.config.consumer_id, running.name, why)
            running.gen.close()
            # its owner creates may still be applied (retried): doubtful until answered
            self._orphan_creates.update(self._owner_creates)
            self.doubtful.update(self._owner_creates.values())
            self._owner_creates.clear()
            if running.name not in _FLOWS:
                self.queue.appendleft((running.name, running.factory, running.on_done))
        self.queue = deque(item for item in self.queue if item[0] not in _FLOWS)
        self.rebalance = None
        self.autocommit_queued = any(item[0] == "autocommit" for item in self.queue)
        for timer in (TimerName.BACKOFF, TimerName.RETRY, TimerName.REGISTER):
            self.cancel_timer(timer)

    # -- watches and health --------------------------------------------------------------------

    def ensure_watch(self, path: str) -> None:
        if path not in self._watches:
            self._watches[path] = False
            self._arm(path)

    def _arm(self, path: str) -> None:
        req = self.req()
        self._watch_reqs[req] = (path, self._epoch)
        self._out.append(GetChildren(req, path, watch=True))

    def rearm_watches(self) -> None:
        """Arm again every watch lost with the connection (or with the session)."""
        for path, armed in self._watches.items():
            if not armed and path not in {p for p, _ in self._watch_reqs.values()}:
                self._arm(path)

    @property
    def watches_armed(self) -> bool:
        return (self.link is ConnState.CONNECTED and bool(self._watches)
                and all(self._watches.values()))

    def _report_health(self) -> None:
        armed = self.watches_armed
        if armed != self._health and self.state is not S.CLOSED:
            self._health = armed
            self._out.append(ReportHealth(armed))

    # -- event handlers ------------------------------------------------------------------------

    def _on_Start(self, event: Start) -> None:
        if self.state is not S.INIT:
            raise LocalProtocolError("Start twice")
        self.session_id = event.session_id
        self._start_pending = True
        procs.start(self)

    def _on_ZkReply(self, event: ZkReply) -> None:
        watch = self._watch_reqs.pop(event.req, None)
        if watch is not None:
            path, epoch = watch
            if epoch == self._epoch and event.error in (None, ZkError.NO_NODE):
                self._watches[path] = True
            else:
                log.info("watch on %s not armed (%s); will retry on reconnect", path,
                         event.error.name if event.error else "connection changed")
            return
        self._owner_creates.pop(event.req, None)
        orphan = self._orphan_creates.pop(event.req, None)
        if orphan is not None:
            if event.error is not ZkError.NODE_EXISTS:  # created, or maybe: ours to delete
                log.warning("%s: an abandoned claim of %s was answered %s; deleting it",
                            self.config.consumer_id, orphan[0],
                            event.error.name if event.error else "created")
                self.doubtful.add(orphan)
                self.request_rebalance("owner znode of an abandoned claim")
            return
        owner = self.exists_reqs.pop(event.req, None)
        if owner is not None:
            # gone (or unreadable: then wait the whole backoff, as before)
            procs.owner_gone(self, owner, event.error is None and event.stat is None)
            return
        self._deliver(event.req, event)

    def _on_Done(self, event: Done) -> None:
        self._deliver(event.req, event)

    def _on_TimerFired(self, event: TimerFired) -> None:
        at = self.timers.get(event.name)
        if at is None or self.now < at:
            return  # replaced, cancelled or early: ours to ignore
        del self.timers[event.name]
        if not self._deliver(event.name, event):
            procs.on_timer(self, event.name)

    def _on_WatchFired(self, event: WatchFired) -> None:
        if event.kind is WatchKind.EXISTS:
            procs.owner_gone(self, event.path, True)
            return
        if event.path not in self._watches:
            return
        self._watches[event.path] = False
        if self.link is ConnState.CONNECTED:  # else re-armed once connected / registered
            self._arm(event.path)
        self.request_rebalance(f"{event.path} changed")

    def request_rebalance(self, why: str) -> None:
        self.want_rebalance = True
        if self.state is S.BACKOFF:
            procs.end_backoff(self, why, counts=False)

    def _on_RebalanceRequested(self, event: RebalanceRequested) -> None:
        self.request_rebalance("requested")

    def _on_Connection(self, event: Connection) -> None:
        if event.state is ConnState.SUSPENDED:
            if self.link is ConnState.CONNECTED:
                self.link = ConnState.SUSPENDED
                self._lose_watches()
                self.emit(PauseDelivery())
                self.notify_state("SUSPENDED")
        elif event.state is ConnState.LOST:
            self._lose_session("session expired")
        elif event.session_id is not None and (self.link is ConnState.LOST
                                               or event.session_id != self.session_id):
            self._lose_session(f"new session 0x{event.session_id:x}")
            self.session_id = event.session_id
            self.link = ConnState.CONNECTED
            if self.state is S.SESSION_LOST:
                procs.recover(self)
        elif self.link is ConnState.SUSPENDED:
            self.link = ConnState.CONNECTED
            self.emit(ResumeDelivery())
            self.notify_state("RESUMED")
            self.rearm_watches()
            # verify our owner znodes and replay changes missed while disconnected
            self.request_rebalance("connection restored")

    def _lose_watches(self) -> None:
        self._epoch += 1
        for path in self._watches:
            self._watches[path] = False

    def _lose_session(self, why: str) -> None:
        self.link = ConnState.LOST
        self._lose_watches()
        if self.state in (S.CLOSING, S.SESSION_LOST):
            return
        self.abort(why)
        self.emit(PauseDelivery())
        self._set_state(S.SESSION_LOST, why)

    def _on_Acked(self, event: Acked) -> None:
        owned = self.owned.get((event.topic, event.partition))
        if owned is not None:
            owned.acked = event.next_offset

    def _on_OffsetReset(self, event: OffsetReset) -> None:
        owned = self.owned.get((event.topic, event.partition))
        if owned is not None:
            owned.acked = event.offset
            procs.write_reset(self, owned, event.offset)

    def _on_FetcherParked(self, event: FetcherParked) -> None:
        owned = self.owned.get((event.topic, event.partition))
        if owned is not None and owned.parked is None:
            owned.parked = event.error
            procs.arm_parked_timer(self)

    def _on_CommitRequested(self, event: CommitRequested) -> None:
        procs.commit_requested(self, event)

    def _on_AssignmentCheckRequested(self, event: AssignmentCheckRequested) -> None:
        procs.check_requested(self, event)

    def _on_CloseRequested(self, event: CloseRequested) -> None:
        if self.state is not S.CLOSING:
            procs.close(self, event.deadline)

    # -- answers owed to callers ---------------------------------------------------------------

    def start_done(self, error: ZkConsumerError | None) -> None:
        if self._start_pending:
            self._start_pending = False
            self._out.append(StartDone(error))

    def commit_done(self, token: int, failures: int) -> None:
        if token in self.commit_tokens:
            del self.commit_tokens[token]
            self._out.append(CommitDone(token, failures))

    def check_done(self, token: int, drift: tuple[str, ...],
                   error: ZkConsumerError | None) -> None:
        self._out.append(AssignmentChecked(token, drift, error))
