"""The executor that runs the real `MemberMachine` -- unchanged -- in the simulation.

It does for the machine what the production driver does, against the simulated world:
ZooKeeper requests go to this process's `ZkClient`; replies, watch notifications and
connection changes come back as `ZkReply`, `WatchFired` and `Connection` events; timers
are loop events; the fetch and delivery commands drive this member's `Feed`; the
application acknowledges each delivered batch after 10 ms-1 s (`Acked`), and answers
``on_revoked`` at once (`Done`).  The manual it follows is the docstrings of
`zkconsumer.consumer.member_events` and `zkconsumer.consumer.member_commands`.

Like the production driver (`zkconsumer.zk.session.ZkSession._op`), a request answered
``CONNECTION_LOSS`` may be sent again after a backoff (0.05 s doubling to 1 s) until
``zk.sessiontimeout.ms + zk.connectiontimeout.ms`` have passed -- after reconnecting,
possibly on a *new* session -- before the machine is told; ``SESSION_EXPIRED`` is answered
at once, and a ``Delete`` is never sent twice (`zkconsumer.zk.requests.ZkRequests.delete`).  Which requests are retried is seeded, so both outcomes the contract allows happen.

If ``handle`` raises (an illegal transition, a bug), the checker fails the schedule with
the machine's error: that is a finding, not a crash of the simulator.

When the first rebalance fails for good (``StartDone`` with an error), ``GroupConsumer.start``
closes the member and raises.  The application is then modelled as ``zkconsumer run`` is
written (`zkconsumer.daemon.runner`): after ``rebalance.backoff.ms`` it starts a *new*
member (``on_start_failed``), counted in ``start_failures``; with ``Spec.strict_start`` it
does not, and the member counts as having given up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zkconsumer.consumer.member_commands import (
    AddPartitions,
    CancelTimer,
    CloseSession,
    Command,
    Create,
    Delete,
    DropPartitions,
    Exists,
    GetChildren,
    GetData,
    Multi,
    NotifyRevoked,
    NotifyState,
    PauseDelivery,
    ReportHealth,
    ResumeDelivery,
    RevokePartitions,
    SetData,
    SetTimer,
    StartDone,
    StartFetchers,
    StopFetchers,
)
from zkconsumer.consumer.member_events import (
    Acked,
    CloseRequested,
    Connection,
    ConnState,
    Done,
    Event,
    Key,
    Start,
    TimerFired,
    TimerName,
    WatchFired,
    WatchKind,
    ZkError,
    ZkReply,
)
from zkconsumer.consumer.member_machine import MemberMachine
from zkconsumer.consumer.member_state import MemberConfig
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.invariants import Checker
from zkconsumer.sim.loop import Loop
from zkconsumer.sim.world import Cluster, Feed, MemberProcess
from zkconsumer.sim.zk import ZooKeeper
from zkconsumer.zk.paths import TopicCount, consumer_ids_path, topic_path

__all__ = ["MachineMember"]

_REQUESTS = (GetData, GetChildren, Exists, Create, SetData, Delete, Multi)


class MachineMember(MemberProcess):
    """One zkconsumer member: the real machine plus this executor (see module docstring)."""

    kind = "zkconsumer"

    def __init__(self, loop: Loop, zk: ZooKeeper, cluster: Cluster, checker: Checker,
                 group: str, consumer_id: str, topics: dict[str, int], *,
                 autocommit_s: float = 10.0, session_timeout_s: float = 6.0) -> None:
        super().__init__(loop, consumer_id)
        self.checker = checker
        self.group = group
        self.topics = list(topics)
        self.client = ZkClient(zk, self.proc, session_timeout_s, self._on_reply,
                               self._on_watch, self._on_state)
        self.feed = Feed(loop, cluster, self.proc, consumer_id, checker, self._on_ack,
                         ack_delay=(0.01, 1.0))
        self.machine = MemberMachine(MemberConfig(
            group=group, consumer_id=consumer_id, topic_count=TopicCount.static(topics),
            autocommit_interval_ms=int(autocommit_s * 1000),
            zk_session_timeout_ms=int(session_timeout_s * 1000)))
        self.retry_for = 2 * session_timeout_s  # sessiontimeout + connectiontimeout
        #: what the application does when start() raises: None = it gives up (exits);
        #: otherwise called once (`zkconsumer run` starts a new member after a backoff)
        self.on_start_failed: Callable[[], None] | None = None
        self.start_failures = 0
        self.started = False
        self.closing = False
        self.health = False
        self._timers: dict[TimerName, float] = {}
        self._added: dict[Key, int] = {}  # key -> the claim's feed epoch (-1: parked)
        # req -> (request, retry deadline, attempts so far)
        self._sent: dict[int, tuple[Any, float, int]] = {}
        self._rebalance_from: int | None = None
        self._runners = self._runner_table()

    # -- Member --------------------------------------------------------------------------------

    def start(self) -> None:
        self.client.connect()

    def terminate(self, deadline: float) -> None:
        self.closing = True
        self.loop.at(self.loop.now, self._handle, CloseRequested(deadline), proc=self.proc)
        self.kill_at(deadline)

    def watches(self) -> list[str]:
        return [consumer_ids_path(self.group)] + [topic_path(t) for t in self.topics]

    # -- events in -----------------------------------------------------------------------------

    def _handle(self, event: Event) -> None:
        if self.exited:
            return
        if self.loop.tracing:
            self.loop.log(self.consumer_id[-8:], f"<- {event}")
        try:
            commands = self.machine.handle(event, self.loop.now)
        except Exception as exc:
            self.checker.fail("machine error", f"{self.consumer_id}: {exc!r} on {event!r}")
            return
        for command in commands:
            self._execute(command)

    def _on_state(self, state: ConnState, session_id: int | None) -> None:
        if state is ConnState.CONNECTED and not self.started:
            self.started = True
            assert session_id is not None
            self._handle(Start(session_id))
            return
        if self.started:
            self._handle(Connection(state, session_id))

    def _on_watch(self, path: str, kind: WatchKind) -> None:
        self._handle(WatchFired(path, kind))

    def _on_reply(self, reply: ZkReply) -> None:
        sent = self._sent.pop(reply.req, None)
        if sent is None:
            return
        request, deadline, attempt = sent
        if (reply.error is ZkError.CONNECTION_LOSS and not self.exited
                and self.loop.now < deadline):
            # zk.session._op: back off 0.05 s doubling to 1 s, then send it again -- after a
            # reconnect, which may be on a new session if the old one expired meanwhile
            self._sent[reply.req] = (request, deadline, attempt + 1)
            delay = min(1.0, 0.05 * 2 ** attempt) * self.loop.rng.uniform(0.5, 1.0)
            self.loop.after(delay, self._resend, request, proc=self.proc)
            return
        self._handle(reply)

    def _resend(self, request: Any) -> None:
        if self.loop.tracing:
            self.loop.log(self.consumer_id[-8:], f"-> (driver retry) {request}")
        self.client.submit(request)

    def _on_ack(self, key: Key, offset: int, epoch: int) -> None:
        # Only acks of messages handed out under the current claim: one from before a
        # drop and re-claim of the partition is stale (production: PartitionState.claim).
        if self._added.get(key) == epoch:
            self._handle(Acked(key[0], key[1], offset))

    def _timer(self, name: TimerName, at: float) -> None:
        if self._timers.get(name) == at:
            del self._timers[name]
            self._handle(TimerFired(name))

    # -- commands out --------------------------------------------------------------------------

    def _execute(self, command: Command) -> None:
        if self.loop.tracing:
            self.loop.log(self.consumer_id[-8:], f"-> {command}")
        run = self._runners.get(type(command))
        if run is not None:
            run(command)
        # NotifyAssigned, RecordCommitted, CommitDone, AssignmentChecked: nothing to do here

    def _runner_table(self) -> dict[type, Any]:
        table: dict[type, Any] = dict.fromkeys(_REQUESTS, self._request)
        table.update({
            SetTimer: self._set_timer,
            CancelTimer: lambda c: self._timers.pop(c.name, None),
            PauseDelivery: lambda c: self.feed.pause(),
            ResumeDelivery: lambda c: self.feed.resume(),
            AddPartitions: self._add,
            RevokePartitions: self._revoke,
            DropPartitions: self._drop,
            StopFetchers: lambda c: self.feed.stop(),
            StartFetchers: lambda c: self.feed.start(),
            NotifyState: lambda c: self._count_rebalance(c.state),
            NotifyRevoked: lambda c: self.loop.at(self.loop.now, self._handle, Done(c.req),
                                                  proc=self.proc),
            StartDone: self._start_done,
            CloseSession: self._close_session,
            ReportHealth: self._health,
        })
        return table

    def _request(self, command: Any) -> None:
        # a Delete is never retried (member_commands: a retry could remove the znode
        # another member created meanwhile); others are, or not, seeded
        retry = self.loop.rng.random() < 0.5 and not isinstance(command, Delete)
        self._sent[command.req] = (command, self.loop.now + self.retry_for if retry else 0.0, 0)
        self.client.submit(command)

    def _set_timer(self, command: SetTimer) -> None:
        self._timers[command.name] = command.at
        self.loop.at(command.at, self._timer, command.name, command.at, proc=self.proc)

    def _add(self, command: AddPartitions) -> None:
        for p in command.partitions:
            self._added[p.key] = -1
            if p.error is None:
                self._added[p.key] = self.feed.add(p.key, 0 if p.offset is None else p.offset)

    def _revoke(self, command: RevokePartitions) -> None:
        for key in command.keys:
            self.feed.revoke(key)

    def _drop(self, command: DropPartitions) -> None:
        for key in command.keys:
            self._added.pop(key, None)
            self.feed.remove(key)

    def _start_done(self, command: StartDone) -> None:
        if command.error is None or self.closing:
            return
        # GroupConsumer.start() closes the member and raises to the application.
        self.start_failures += 1
        self.closing = True
        self.loop.at(self.loop.now, self._handle, CloseRequested(self.loop.now + 5.0),
                     proc=self.proc)
        self.kill_at(self.loop.now + 5.0)
        if self.on_start_failed is None:
            self.gave_up += 1  # an application that does not retry: the member gave up
        else:
            self.on_start_failed()

    def _close_session(self, command: CloseSession) -> None:
        self.exit()

    def _health(self, command: ReportHealth) -> None:
        self.health = command.watches_armed

    def _count_rebalance(self, state: str) -> None:
        if state == "REBALANCING" and self._rebalance_from is None:
            self.rebalances += 1
            self._rebalance_from = self.client.requests
        elif state == "STABLE" and self._rebalance_from is not None:
            self.rebalance_ops.append(self.client.requests - self._rebalance_from)
            self._rebalance_from = None
