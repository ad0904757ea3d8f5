"""`ZkClient`: one process's connection to the simulated ZooKeeper, as kazoo behaves.

What the process sees (all of it delivered on its `Process`, so a paused process gets it at
wake-up and a killed one never):

* ``on_reply(ZkReply)`` for every request, **in the order sent** (one session is FIFO);
  latency varies per request (0.2-3 ms, 2 % of them 20 times that; seeded) and grows
  while ZooKeeper is slow (`ZooKeeper.slow`);
* ``on_watch(path, kind)`` for a fired watch, ordered with the replies: a reply that shows
  the new state never overtakes the notification of the change;
* ``on_state(ConnState, session_id)`` -- kazoo's listener: ``SUSPENDED`` when the connection
  breaks, then either ``CONNECTED`` with the same session (it survived) or ``LOST``
  followed by ``CONNECTED`` with a new session id (it expired meanwhile).

A broken connection (`drop`): every request not yet answered is answered
``CONNECTION_LOSS`` -- and each one that had not reached the server yet may still reach it
(seeded: the answer is lost, the effect is not), which is the ambiguity a member must
survive.  Watches are lost with the connection (kazoo 2.11 drops its watchers on
SUSPENDED) and never fire.  Requests made while suspended wait and are sent after
reconnecting on the same session; if the session expired meanwhile they fail
``SESSION_EXPIRED`` (kazoo's ``_notify_pending``).  The client retries connecting every
0.1-0.5 s while the network (`net_down`) or the server is down.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from zkconsumer.consumer.member_commands import ZkRequest
from zkconsumer.consumer.member_events import ConnState, WatchKind, ZkError, ZkReply
from zkconsumer.sim.loop import Loop, Process
from zkconsumer.sim.zk import Session, ZooKeeper

__all__ = ["ZkClient"]


class _Req:
    __slots__ = ("applied", "reply_at", "req")

    def __init__(self, req: ZkRequest) -> None:
        self.req = req
        self.applied = False
        self.reply_at: float | None = None


class ZkClient:
    """A kazoo-like connection owned by one process (see the module docstring)."""

    def __init__(self, zk: ZooKeeper, proc: Process, timeout: float,
                 on_reply: Callable[[ZkReply], None],
                 on_watch: Callable[[str, WatchKind], None],
                 on_state: Callable[[ConnState, int | None], None]) -> None:
        self.zk = zk
        self.loop: Loop = zk.loop
        self.proc = proc
        self.timeout = timeout
        self.on_reply = on_reply
        self.on_watch = on_watch
        self.on_state = on_state
        self.state = ConnState.SUSPENDED
        self.closed = False
        self.net_down = False
        self.session: Session | None = None
        self.requests = 0
        self._gen = 0
        self._cuts: dict[int, float] = {}
        self._inflight: deque[_Req] = deque()
        self._waiting: list[ZkRequest] = []
        self._last_apply = 0.0
        self._last_out = 0.0
        self._connecting = False

    # -- connection ----------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.state is ConnState.CONNECTED and not self.closed

    def connect(self) -> None:
        """Start connecting (a new session, or the current one if it is still alive)."""
        if not self._connecting and not self.closed:
            self._connecting = True
            self.loop.after(self._latency(), self._attempt, proc=self.proc)

    def _latency(self) -> float:
        r = self.loop.rng.random()
        base = 0.0002 + r * 0.0028
        if r > 0.98:  # a slow tail: 2 % of answers take about 20 times longer
            base *= 20
        return base * self.zk.slow

    def _attempt(self) -> None:
        if self.closed or self.state is ConnState.CONNECTED:
            self._connecting = False
            return
        if self.net_down or not self.zk.up:
            self.loop.after(self.loop.rng.uniform(0.1, 0.5), self._attempt, proc=self.proc)
            return
        self._connecting = False
        zk = self.zk
        if self.session is not None and self.session.alive:
            zk.touch(self.session)
            self.state = ConnState.CONNECTED
            self.on_state(ConnState.CONNECTED, self.session.id)
        else:
            if self.session is not None:
                waiting, self._waiting = self._waiting, []
                self.on_state(ConnState.LOST, None)
                for req in waiting:
                    self.on_reply(ZkReply(req.req, ZkError.SESSION_EXPIRED))
            self.session = zk.open_session(self.timeout, self)
            self.state = ConnState.CONNECTED
            self.on_state(ConnState.CONNECTED, self.session.id)
        waiting, self._waiting = self._waiting, []
        for req in waiting:
            self._send(req)

    def drop(self) -> None:
        """The connection breaks now (network blip, ZooKeeper restart, expiry)."""
        if self.state is not ConnState.CONNECTED or self.closed:
            return
        now = self.loop.now
        self._cuts[self._gen] = now
        self._gen += 1
        self.state = ConnState.SUSPENDED
        session = self.session
        assert session is not None
        zk = self.zk
        keep: deque[_Req] = deque()
        lost: list[_Req] = []
        for r in self._inflight:
            if r.reply_at is not None and r.reply_at <= now:
                keep.append(r)  # the answer is already in the socket buffer
                continue
            if not r.applied and zk.up and session.alive and self.loop.rng.random() < 0.5:
                r.applied = True
                zk.execute(session.id, r.req)  # it reached the server; its answer did not
            lost.append(r)
        self._inflight = keep
        if session.alive:
            zk.drop_watches(session.id)
            zk.silent(session)
        self.loop.at(now, self._report_drop, lost, proc=self.proc)
        self.connect()

    def _report_drop(self, lost: list[_Req]) -> None:
        for r in lost:
            self.on_reply(ZkReply(r.req.req, ZkError.CONNECTION_LOSS))
        self.on_state(ConnState.SUSPENDED, self.session.id if self.session else None)

    def close(self) -> None:
        """End the session now (a clean close): ephemerals vanish at once."""
        if self.closed:
            return
        self.closed = True
        self._gen += 1
        self._inflight.clear()
        self._waiting.clear()
        if self.session is not None and self.session.alive and self.zk.up:
            self.zk.close_session(self.session)
        elif self.session is not None:
            self.zk.silent(self.session)

    def vanish(self) -> None:
        """The process died (kill -9): the server stops hearing from it."""
        self.closed = True
        if self.session is not None and self.session.alive:
            self.zk.silent(self.session)

    # -- requests ------------------------------------------------------------------------------

    def submit(self, req: ZkRequest) -> None:
        """Send a request; its answer comes back through ``on_reply``."""
        self.requests += 1
        if self.closed:
            self.loop.at(self.loop.now, self.on_reply, ZkReply(req.req, ZkError.SESSION_EXPIRED),
                         proc=self.proc)
        elif self.state is ConnState.CONNECTED:
            self._send(req)
        else:
            self._waiting.append(req)

    def _send(self, req: ZkRequest) -> None:
        r = _Req(req)
        self._inflight.append(r)
        when = max(self.loop.now + self._latency(), self._last_apply)
        self._last_apply = when
        self.loop.at(when, self._arrive, r, self._gen)

    def _arrive(self, r: _Req, gen: int) -> None:
        if gen != self._gen or r.applied or not self.zk.up or self.session is None:
            return
        r.applied = True
        reply = self.zk.execute(self.session.id, r.req)
        when = max(self.loop.now + self._latency(), self._last_out)
        self._last_out = when
        r.reply_at = when
        self.loop.at(when, self._deliver_reply, r, reply, gen, when, proc=self.proc)

    def _valid(self, gen: int, when: float) -> bool:
        return gen == self._gen or when <= self._cuts.get(gen, -1.0)

    def _deliver_reply(self, r: _Req, reply: ZkReply, gen: int, when: float) -> None:
        if not self._valid(gen, when):
            return
        if self._inflight and self._inflight[0] is r:
            self._inflight.popleft()
        self.on_reply(reply)

    def watch_fired(self, path: str, kind: WatchKind) -> None:
        """Called by the server: queue the notification behind the answers already sent."""
        when = max(self.loop.now + self._latency(), self._last_out)
        self._last_out = when
        self.loop.at(when, self._deliver_watch, path, kind, self._gen, when, proc=self.proc)

    def _deliver_watch(self, path: str, kind: WatchKind, gen: int, when: float) -> None:
        if self._valid(gen, when):
            self.on_watch(path, kind)
