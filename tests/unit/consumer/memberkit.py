"""A small in-memory ZooKeeper and executor for unit tests of the member state machine.

Deliberately simple (the deterministic simulator in ``zkconsumer/sim`` is the faithful
one): requests are answered in order when the test calls `Harness.run`, timers fire when
the test advances time, watches are one-shot.  Just enough to check what commands the
machine emits for a sequence of events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zkconsumer.consumer.member_commands import (
    AssignmentChecked,
    CancelTimer,
    CloseSession,
    Command,
    CommitDone,
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    NotifyRevoked,
    NotifyState,
    ReportHealth,
    SetData,
    SetTimer,
    StartDone,
)
from zkconsumer.consumer.member_events import (
    Connection,
    ConnState,
    Done,
    Event,
    Stat,
    TimerFired,
    TimerName,
    WatchFired,
    WatchKind,
    ZkError,
    ZkReply,
)
from zkconsumer.consumer.member_machine import MemberMachine


@dataclass
class Node:
    data: bytes | None
    version: int = 0
    owner: int = 0


@dataclass
class FakeZk:
    nodes: dict[str, Node] = field(default_factory=lambda: {"/": Node(None)})
    child_watches: dict[str, set[int]] = field(default_factory=dict)  # path -> members
    exists_watches: dict[str, set[int]] = field(default_factory=dict)
    fired: list[tuple[int, WatchFired]] = field(default_factory=list)
    ops: int = 0
    #: (request type name, path) -> applied?  The next such request is answered
    #: CONNECTION_LOSS, after being applied (True) or not (False): an unknown outcome.
    lose: dict[tuple[str, str], bool] = field(default_factory=dict)

    def children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):] and p != "/")

    @staticmethod
    def parent(path: str) -> str:
        return path.rsplit("/", 1)[0] or "/"

    def _fire_children(self, path: str) -> None:
        for member in self.child_watches.pop(path, set()):
            self.fired.append((member, WatchFired(path, WatchKind.CHILDREN)))

    def _fire_exists(self, path: str) -> None:
        for member in self.exists_watches.pop(path, set()):
            self.fired.append((member, WatchFired(path, WatchKind.EXISTS)))
        # a children watch on a missing znode is an exists watch: its creation fires it
        if path in self.child_watches and path in self.nodes:
            self._fire_children(path)

    def put(self, path: str, data: bytes | None, owner: int = 0) -> None:
        """Create (with parents) or overwrite, as an outside writer would."""
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            if parent not in self.nodes:
                self.nodes[parent] = Node(None)
                self._fire_children(self.parent(parent))
                self._fire_exists(parent)
        if path in self.nodes:
            node = self.nodes[path]
            node.data, node.version = data, node.version + 1
            self._fire_exists(path)
        else:
            self.nodes[path] = Node(data, 0, owner)
            self._fire_children(self.parent(path))
            self._fire_exists(path)

    def remove(self, path: str) -> None:
        if self.nodes.pop(path, None) is not None:
            self._fire_children(self.parent(path))
            self._fire_exists(path)
            self._fire_children(path)

    def expire(self, session: int) -> None:
        for path in [p for p, n in self.nodes.items() if n.owner == session]:
            self.remove(path)

    def execute(self, member: int, session: int, cmd: Command) -> ZkReply:
        self.ops += 1
        applied = self.lose.pop((type(cmd).__name__, getattr(cmd, "path", "")), None)
        if applied is not None:
            if applied:
                self._apply(member, session, cmd)
            return ZkReply(cmd.req, ZkError.CONNECTION_LOSS)  # type: ignore[union-attr]
        return self._apply(member, session, cmd)

    def _apply(self, member: int, session: int, cmd: Command) -> ZkReply:
        if isinstance(cmd, GetData):
            node = self.nodes.get(cmd.path)
            if node is None:
                return ZkReply(cmd.req, ZkError.NO_NODE)
            return ZkReply(cmd.req, data=node.data, stat=Stat(node.version, node.owner))
        if isinstance(cmd, GetChildren):
            if cmd.watch:
                self.child_watches.setdefault(cmd.path, set()).add(member)
            if cmd.path not in self.nodes:
                return ZkReply(cmd.req, ZkError.NO_NODE)
            return ZkReply(cmd.req, children=tuple(self.children(cmd.path)))
        if isinstance(cmd, Exists):
            if cmd.watch:
                self.exists_watches.setdefault(cmd.path, set()).add(member)
            node = self.nodes.get(cmd.path)
            return ZkReply(cmd.req, stat=None if node is None else Stat(node.version,
                                                                          node.owner))
        if isinstance(cmd, Create):
            if cmd.path in self.nodes:
                return ZkReply(cmd.req, ZkError.NODE_EXISTS)
            parts = cmd.path.strip("/").split("/")
            for i in range(1, len(parts)):
                parent = "/" + "/".join(parts[:i])
                if parent not in self.nodes:
                    self.put(parent, None)
            self.put(cmd.path, cmd.data, session if cmd.ephemeral else 0)
            return ZkReply(cmd.req, stat=Stat(0, session if cmd.ephemeral else 0))
        if isinstance(cmd, SetData):
            node = self.nodes.get(cmd.path)
            if node is None:
                return ZkReply(cmd.req, ZkError.NO_NODE)
            if cmd.version not in (-1, node.version):
                return ZkReply(cmd.req, ZkError.BAD_VERSION)
            self.put(cmd.path, cmd.data)
            return ZkReply(cmd.req, stat=Stat(node.version, node.owner))
        if isinstance(cmd, Delete):
            node = self.nodes.get(cmd.path)
            if node is None:
                return ZkReply(cmd.req, ZkError.NO_NODE)
            if cmd.version not in (-1, node.version):
                return ZkReply(cmd.req, ZkError.BAD_VERSION)
            if self.children(cmd.path):
                return ZkReply(cmd.req, ZkError.NOT_EMPTY)
            self.remove(cmd.path)
            return ZkReply(cmd.req)
        raise AssertionError(f"not a ZooKeeper request: {cmd!r}")


@dataclass
class Member:
    index: int
    machine: MemberMachine
    session: int
    inbox: list[Event] = field(default_factory=list)
    log: list[Command] = field(default_factory=list)
    timers: dict[TimerName, float] = field(default_factory=dict)
    health: bool | None = None
    start_result: Any = "pending"
    acks_on_revoke: dict[tuple[str, str], int] = field(default_factory=dict)

    def states(self) -> list[str]:
        return [c.state for c in self.log if isinstance(c, NotifyState)]

    def commands(self, kind: type) -> list[Any]:
        return [c for c in self.log if isinstance(c, kind)]


class Harness:
    """Members sharing one `FakeZk`; `run` delivers everything until nothing is left."""

    def __init__(self) -> None:
        self.zk = FakeZk()
        self.now = 0.0
        self.members: list[Member] = []
        self.paused: set[int] = set()  # members whose requests are not answered (hung)

    def add(self, machine: MemberMachine, session: int) -> Member:
        member = Member(len(self.members), machine, session)
        self.members.append(member)
        return member

    def expire(self, member: Member) -> None:
        """The member's session expires: its ephemerals and its watches are gone."""
        self.zk.expire(member.session)
        for watches in (*self.zk.child_watches.values(), *self.zk.exists_watches.values()):
            watches.discard(member.index)
        self.post(member, Connection(ConnState.LOST))

    def post(self, member: Member, event: Event) -> None:
        member.inbox.append(event)

    def _execute(self, member: Member, commands: list[Command]) -> None:
        for cmd in commands:
            member.log.append(cmd)
            if isinstance(cmd, GetData | GetChildren | Exists | Create | SetData | Delete):
                if member.index in self.paused:
                    continue
                member.inbox.append(self.zk.execute(member.index, member.session, cmd))
            elif isinstance(cmd, SetTimer):
                member.timers[cmd.name] = cmd.at
            elif isinstance(cmd, CancelTimer):
                member.timers.pop(cmd.name, None)
            elif isinstance(cmd, NotifyRevoked):
                from zkconsumer.consumer.member_events import Acked
                for (t, p), off in member.acks_on_revoke.items():
                    member.inbox.append(Acked(t, p, off))
                member.inbox.append(Done(cmd.req))
            elif isinstance(cmd, ReportHealth):
                member.health = cmd.watches_armed
            elif isinstance(cmd, StartDone):
                member.start_result = cmd.error
            elif isinstance(cmd, CloseSession):
                self.zk.expire(member.session)
            elif isinstance(cmd, (CommitDone, AssignmentChecked)):
                pass

    def run(self, limit: int = 100_000) -> None:
        """Deliver queued events and fired watches until quiet (time does not move)."""
        for _ in range(limit):
            for member_index, fired in self.zk.fired:
                self.members[member_index].inbox.append(fired)
            self.zk.fired.clear()
            busy = [m for m in self.members if m.inbox]
            if not busy:
                return
            for member in busy:
                event = member.inbox.pop(0)
                self._execute(member, member.machine.handle(event, self.now))
        raise AssertionError("the members did not settle")

    def advance(self, seconds: float) -> None:
        """Move time, firing due timers in time order, running after each."""
        end = self.now + seconds
        while True:
            self.run()
            due = [(at, m.index, name) for m in self.members
                   for name, at in m.timers.items() if at <= end]
            if not due:
                break
            at, index, name = min(due, key=lambda d: (d[0], d[1], d[2].value))
            member = self.members[index]
            del member.timers[name]
            self.now = max(self.now, at)
            member.inbox.append(TimerFired(name))
        self.now = end
        self.run()
