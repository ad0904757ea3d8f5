"""An in-memory ZooKeeper server: the tree, sessions, ephemerals and one-shot watches.

Faithful to what the 0.7 group protocol relies on, and nothing more:

* a tree of znodes, each with data (``None`` = null data), a data ``version`` and a child
  version ``cversion``; persistent or ephemeral (owned by a session; an ephemeral cannot
  have children);
* writes with ZooKeeper's outcomes as values (`ZkError`): ``NODE_EXISTS``, ``NO_NODE``,
  ``NOT_EMPTY``, ``BAD_VERSION`` (compare-and-set on ``version``), and `Multi`: every op
  applied or none (validated against the state left by the ops before it);
* `Create` makes missing ancestors persistent with null data (zkclient's
  ``createParentPath``, and the contract in `zkconsumer.consumer.member_events`);
* sessions with a timeout: the server expires a session ``timeout`` after it last heard
  from the client (`silent`), deleting its ephemerals -- each deletion fires watches like
  any other.  `touch` (the client reconnected, or pinged) cancels a pending expiry.  While
  the server is down (`stop`) nothing expires; `start` restarts every session's timeout,
  as a restarted ZooKeeper ensemble does;
* one-shot watches: a *children* watch (`GetChildren` with ``watch``) fires on a child
  created or deleted and on the znode's deletion; an *existence* watch (`Exists` with
  ``watch``, or `GetChildren` with ``watch`` on a missing znode) fires on creation,
  deletion or data change.  A session holds at most one of each per path (ZooKeeper
  deduplicates), and a fired or dropped watch is gone.  Notifications go to the session's
  client (`zkconsumer.sim.client.ZkClient`), which delivers them in order with its replies.

No time passes in here: the client decides when a request reaches the server and when its
answer reaches the process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from zkconsumer.consumer.member_commands import (
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    SetData,
    ZkRequest,
)
from zkconsumer.consumer.member_events import Stat, WatchKind, ZkError, ZkReply
from zkconsumer.sim.loop import Loop

__all__ = ["Node", "Session", "WatchSink", "ZooKeeper"]


class WatchSink(Protocol):
    """A session's client connection: receives its watch notifications, and learns when
    the server closes the connection (at expiry, or when the server goes down)."""

    def watch_fired(self, path: str, kind: WatchKind) -> None: ...

    def drop(self) -> None: ...

    @property
    def connected(self) -> bool: ...


class Node:
    __slots__ = ("children", "cversion", "data", "owner", "version")

    def __init__(self, data: bytes | None, owner: int) -> None:
        self.data = data
        self.version = 0
        self.cversion = 0
        self.owner = owner  # session id of an ephemeral, 0 if persistent
        self.children: dict[str, None] = {}


class Session:
    __slots__ = (
        "alive",
        "ended_at",
        "ephemerals",
        "expires_at",
        "expiry_gen",
        "id",
        "sink",
        "timeout",
    )

    def __init__(self, sid: int, timeout: float, sink: WatchSink | None) -> None:
        self.id = sid
        self.timeout = timeout
        self.alive = True
        self.ephemerals: dict[str, None] = {}
        self.sink = sink
        self.expiry_gen = 0
        self.expires_at: float | None = None
        self.ended_at: float | None = None


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


_Undo = list[Callable[[], None]]
_Fired = list[tuple[str, str]]  # (path, "created" | "deleted" | "changed" | "child")


class ZooKeeper:
    """The server.  ``on_expire(session)`` observers learn of expiries (for invariants)."""

    def __init__(self, loop: Loop) -> None:
        self.loop = loop
        self.nodes: dict[str, Node] = {"/": Node(None, 0)}
        self.sessions: dict[int, Session] = {}
        self.up = True
        self._outages = 0
        self.slow = 1.0
        self.requests = 0
        self._next_sid = 0x100000000
        self._reads: dict[type, Callable[[int, Any], ZkReply]] = {
            GetData: self._get_data, GetChildren: self._get_children, Exists: self._exists}
        self.child_watches: dict[str, dict[int, None]] = {}
        self.exist_watches: dict[str, dict[int, WatchKind]] = {}
        self.expired: list[tuple[float, int]] = []
        #: Called with (path, data) after every successful create or data change; ``writer``
        #: is then the session id that made it.
        self.on_write: Callable[[str, bytes | None], None] | None = None
        #: Called with (path, node) before a request deletes a znode (not at expiry).
        self.on_delete: Callable[[str, Node], None] | None = None
        self.writer = 0

    # -- sessions ------------------------------------------------------------------------------

    def open_session(self, timeout: float, sink: WatchSink | None) -> Session:
        self._next_sid += 1
        session = Session(self._next_sid, timeout, sink)
        self.sessions[session.id] = session
        return session

    def silent(self, session: Session) -> None:
        """The server stopped hearing from the client: expire after the timeout unless
        `touch`\\ ed first.  An expiry already pending keeps its (earlier) time."""
        if not session.alive or session.expires_at is not None:
            return
        self._arm_expiry(session)

    def _arm_expiry(self, session: Session) -> None:
        session.expiry_gen += 1
        session.expires_at = self.loop.now + session.timeout
        self.loop.at(session.expires_at, self._expire_due, session, session.expiry_gen)

    def touch(self, session: Session) -> None:
        session.expiry_gen += 1
        session.expires_at = None

    def _expire_due(self, session: Session, gen: int) -> None:
        if gen == session.expiry_gen and session.alive and self.up:
            self.close_session(session, expired=True)

    def close_session(self, session: Session, *, expired: bool = False) -> None:
        """End a session (closed by its client, or expired): its ephemerals vanish."""
        if not session.alive:
            return
        session.alive = False
        session.expires_at = None
        session.ended_at = self.loop.now
        if expired:
            self.expired.append((self.loop.now, session.id))
        self.loop.log("zk", f"session {session.id:#x} {'expired' if expired else 'closed'}")
        fired: _Fired = []
        self.writer = 0  # the server deletes these, nobody's request
        for path in list(session.ephemerals):
            self._delete(path, -1, fired, None)
        self.drop_watches(session.id)
        self._fire(fired)
        if expired and session.sink is not None:
            session.sink.drop()

    def drop_watches(self, sid: int) -> None:
        """The session's connection broke: the server forgets its watches."""
        for path in [p for p, w in self.child_watches.items() if sid in w]:
            del self.child_watches[path][sid]
            if not self.child_watches[path]:
                del self.child_watches[path]
        for path in [p for p, x in self.exist_watches.items() if sid in x]:
            del self.exist_watches[path][sid]
            if not self.exist_watches[path]:
                del self.exist_watches[path]

    def stop(self) -> None:
        """The ensemble goes down: every connection breaks; nothing is answered and nothing
        expires until `start`.  Overlapping outages nest: up again at the last `start`."""
        self._outages += 1
        self.up = False
        for session in list(self.sessions.values()):
            if session.alive and session.sink is not None:
                session.sink.drop()

    def start(self) -> None:
        """The ensemble is back: every live session whose client is not connected gets a
        full timeout to reconnect."""
        self._outages -= 1
        if self._outages > 0 or self.up:
            return
        self.up = True
        for session in self.sessions.values():
            if session.alive and session.sink is not None and not session.sink.connected:
                self._arm_expiry(session)

    def watched(self, sid: int, path: str) -> bool:
        """Whether the session holds a children or existence watch on ``path``."""
        return sid in self.child_watches.get(path, ()) or sid in self.exist_watches.get(path, ())

    # -- requests ------------------------------------------------------------------------------

    def execute(self, sid: int, req: ZkRequest) -> ZkReply:
        """Apply one request on behalf of session ``sid`` and return its answer."""
        self.requests += 1
        self.writer = sid
        session = self.sessions.get(sid)
        if session is None or not session.alive:
            return ZkReply(req.req, ZkError.SESSION_EXPIRED)
        read = self._reads.get(type(req))
        if read is not None:
            return read(sid, req)  # type: ignore[no-any-return]
        fired: _Fired = []
        if isinstance(req, Multi):
            undo: _Undo = []
            for op in req.ops:
                error = self._write(session, op, fired, undo)
                if error is not None:
                    for step in reversed(undo):
                        step()
                    return ZkReply(req.req, error)
            self._fire(fired)
            return ZkReply(req.req)
        error = self._write(session, req, fired, None)
        if self.loop.tracing:
            self.loop.log("zk", f"{sid:#x} {type(req).__name__} {getattr(req, 'path', '')}: "
                          f"{'ok' if error is None else error.value}")
        self._fire(fired)
        if error is not None:
            return ZkReply(req.req, error)
        if isinstance(req, Delete):
            return ZkReply(req.req)
        node = self.nodes[req.path]
        return ZkReply(req.req, stat=Stat(node.version, node.owner))

    def _get_data(self, sid: int, req: GetData) -> ZkReply:
        node = self.nodes.get(req.path)
        if node is None:
            return ZkReply(req.req, ZkError.NO_NODE)
        return ZkReply(req.req, data=node.data, stat=Stat(node.version, node.owner))

    def _get_children(self, sid: int, req: GetChildren) -> ZkReply:
        node = self.nodes.get(req.path)
        if node is None:
            if req.watch:
                self.exist_watches.setdefault(req.path, {})[sid] = WatchKind.CHILDREN
            return ZkReply(req.req, ZkError.NO_NODE)
        if req.watch:
            self.child_watches.setdefault(req.path, {})[sid] = None
        return ZkReply(req.req, stat=Stat(node.version, node.owner),
                       children=tuple(node.children))

    def _exists(self, sid: int, req: Exists) -> ZkReply:
        node = self.nodes.get(req.path)
        if req.watch:
            self.exist_watches.setdefault(req.path, {})[sid] = WatchKind.EXISTS
        return ZkReply(req.req, stat=None if node is None else Stat(node.version, node.owner))

    def _write(self, session: Session, req: ZkRequest, fired: _Fired,
               undo: _Undo | None) -> ZkError | None:
        if isinstance(req, Create):
            return self._create(req.path, req.data, session.id if req.ephemeral else 0,
                                fired, undo)
        if isinstance(req, SetData):
            return self._set(req.path, req.data, req.version, fired, undo)
        if isinstance(req, Delete):
            return self._delete(req.path, req.version, fired, undo)
        return ZkError.OTHER

    def _create(self, path: str, data: bytes | None, owner: int, fired: _Fired,
                undo: _Undo | None) -> ZkError | None:
        if path in self.nodes:
            return ZkError.NODE_EXISTS
        if path == "/" or not path.startswith("/") or path.endswith("/"):
            return ZkError.OTHER
        parent = _parent(path)
        if parent not in self.nodes:
            error = self._create(parent, None, 0, fired, undo)
            if error is not None:
                return error
        pnode = self.nodes[parent]
        if pnode.owner:
            return ZkError.OTHER  # NoChildrenForEphemerals
        node = Node(data, owner)
        self.nodes[path] = node
        pnode.children[path.rsplit("/", 1)[1]] = None
        pnode.cversion += 1
        if owner:
            self.sessions[owner].ephemerals[path] = None
        fired.append((path, "created"))
        fired.append((parent, "child"))
        if undo is not None:
            undo.append(lambda: self._unlink(path))
        return None

    def _unlink(self, path: str) -> None:
        node = self.nodes.pop(path)
        pnode = self.nodes[_parent(path)]
        del pnode.children[path.rsplit("/", 1)[1]]
        pnode.cversion += 1
        if node.owner:
            self.sessions[node.owner].ephemerals.pop(path, None)

    def _relink(self, path: str, node: Node) -> None:
        self.nodes[path] = node
        pnode = self.nodes[_parent(path)]
        pnode.children[path.rsplit("/", 1)[1]] = None
        pnode.cversion += 1
        if node.owner:
            self.sessions[node.owner].ephemerals[path] = None

    def _set(self, path: str, data: bytes, version: int, fired: _Fired,
             undo: _Undo | None) -> ZkError | None:
        node = self.nodes.get(path)
        if node is None:
            return ZkError.NO_NODE
        if version != -1 and version != node.version:
            return ZkError.BAD_VERSION
        old = (node.data, node.version)
        node.data = data
        node.version += 1
        fired.append((path, "changed"))
        if undo is not None:
            def restore() -> None:
                node.data, node.version = old
            undo.append(restore)
        return None

    def _delete(self, path: str, version: int, fired: _Fired,
                undo: _Undo | None) -> ZkError | None:
        node = self.nodes.get(path)
        if node is None or path == "/":
            return ZkError.NO_NODE
        if version != -1 and version != node.version:
            return ZkError.BAD_VERSION
        if node.children:
            return ZkError.NOT_EMPTY
        if self.on_delete is not None and self.writer:
            self.on_delete(path, node)
        self._unlink(path)
        fired.append((path, "deleted"))
        fired.append((_parent(path), "child"))
        if undo is not None:
            undo.append(lambda: self._relink(path, node))
        return None

    def _fire(self, fired: _Fired) -> None:
        on_write = self.on_write
        for path, what in fired:
            if what == "child":
                self._notify_children(path)
                continue
            if on_write is not None and what != "deleted":
                node = self.nodes.get(path)
                if node is not None:
                    on_write(path, node.data)
            watchers = self.exist_watches.pop(path, None)
            if watchers:
                for sid, kind in watchers.items():
                    self._notify(sid, path, kind)
            if what == "deleted":
                self._notify_children(path)

    def _notify_children(self, path: str) -> None:
        watchers = self.child_watches.pop(path, None)
        if watchers:
            for sid in watchers:
                self._notify(sid, path, WatchKind.CHILDREN)

    def _notify(self, sid: int, path: str, kind: WatchKind) -> None:
        session = self.sessions.get(sid)
        if session is not None and session.alive and session.sink is not None:
            session.sink.watch_fired(path, kind)
