"""Single ZooKeeper requests with their outcome as a value: what a state-machine driver needs.

The group member's machine (`zkconsumer.consumer.member_machine`) asks for one request at a
time -- get, children (optionally watched), exists (optionally watched), create, versioned
set, versioned delete -- and wants the *outcome*, errors included, as a value it can reason
about (no node, node exists, bad version, connection loss, session expired).  `ZkRequests`
runs them on a `ZkSession` with its semantics (retries across connection losses until the
operation timeout, null-data parents as zkclient creates them) and returns a `ZkOutcome`;
kazoo exceptions never leave this module.

Watches are one-shot, as in ZooKeeper.  A children watch on a missing znode becomes an
existence watch (its creation fires it).  ``on_fire(path, kind)`` is called on kazoo's event
thread once per firing of a (path, kind) pair, however many times it was armed (one
callback object per pair, which kazoo keeps in a set); kazoo's ``NONE`` events -- the
connection or the session went away, taking the watches with it -- are not firings.

Every request but `ZkRequests.delete` is retried across connection losses (the session's
semantics); a delete is tried once (see there).  `ZkRequests.begin` pipelines: a batch of
requests costs one round trip.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
)
from kazoo.exceptions import SessionExpiredError as KazooSessionExpiredError
from kazoo.protocol.states import WatchedEvent

from zkconsumer.errors import SessionExpiredError, ZooKeeperError
from zkconsumer.zk.session import ZkSession

__all__ = ["CHILDREN", "EXISTS", "ZkOutcome", "ZkRequests"]

log = logging.getLogger(__name__)

CHILDREN = "CHILDREN"
EXISTS = "EXISTS"


class ZkOutcome(NamedTuple):
    """``error``: None, or ``NO_NODE`` / ``NODE_EXISTS`` / ``BAD_VERSION`` / ``NOT_EMPTY`` /
    ``CONNECTION_LOSS`` (no answer in time: the request may or may not have been applied) /
    ``SESSION_EXPIRED`` / ``OTHER``.  ``version`` is -1 when there is no stat."""

    error: str | None = None
    data: bytes | None = None
    version: int = -1
    ephemeral_owner: int = 0
    children: tuple[str, ...] | None = None
    message: str = ""

    @property
    def has_stat(self) -> bool:
        return self.version >= 0


#: ZooKeeper's answers that are outcomes, not failures, by their kazoo exception.
_ANSWER_CODES: dict[type[Exception], str] = {
    NoNodeError: "NO_NODE", NodeExistsError: "NODE_EXISTS", BadVersionError: "BAD_VERSION",
    NotEmptyError: "NOT_EMPTY"}
_ANSWERS = (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError)


def _stat(stat: Any, data: bytes | None = None) -> ZkOutcome:
    return ZkOutcome(None, data, int(stat.version), int(stat.ephemeralOwner))


class ZkRequests:
    """See the module docstring.  Thread-safe as `ZkSession` is; methods block."""

    def __init__(self, session: ZkSession, on_fire: Callable[[str, str], None]) -> None:
        self.session = session
        self._on_fire = on_fire
        self._watchers: dict[tuple[str, str], Callable[[WatchedEvent], None]] = {}

    def _watcher(self, path: str, kind: str) -> Callable[[WatchedEvent], None]:
        key = (path, kind)
        fn = self._watchers.get(key)
        if fn is None:
            def fire(event: WatchedEvent) -> None:
                if event.type != "NONE":
                    self._on_fire(path, kind)
            fn = self._watchers.setdefault(key, fire)
        return fn

    def run(self, what: str, path: str, call: Callable[[], ZkOutcome]) -> ZkOutcome:
        """``call()`` with every failure turned into an outcome."""
        try:
            return call()
        except _ANSWERS as exc:
            return ZkOutcome(_ANSWER_CODES[type(exc)])
        except SessionExpiredError as exc:
            return ZkOutcome("SESSION_EXPIRED", message=str(exc))
        except ZooKeeperError as exc:
            invalid = "invalid request" in str(exc)
            return ZkOutcome("OTHER" if invalid else "CONNECTION_LOSS", message=str(exc))

    def get(self, path: str) -> ZkOutcome:
        def call() -> ZkOutcome:
            client = self.session.client
            data, stat = self.session._op("get", path, lambda: client.get_async(path))
            return _stat(stat, None if data is None else bytes(data))
        return self.run("get", path, call)

    def children(self, path: str, watch: bool) -> ZkOutcome:
        def call() -> ZkOutcome:
            client = self.session.client
            fn = self._watcher(path, CHILDREN) if watch else None
            while True:
                try:
                    names = self.session._op("get_children", path,
                                             lambda: client.get_children_async(path, watch=fn))
                    return ZkOutcome(children=tuple(sorted(names)))
                except NoNodeError:
                    if fn is None:
                        raise
                # Missing: watch for its creation.  If it was created in between, read again.
                if self.session._op("exists", path,
                                    lambda: client.exists_async(path, watch=fn)) is None:
                    return ZkOutcome("NO_NODE")
        return self.run("get_children", path, call)

    def exists(self, path: str, watch: bool) -> ZkOutcome:
        def call() -> ZkOutcome:
            client = self.session.client
            fn = self._watcher(path, EXISTS) if watch else None
            stat = self.session._op("exists", path, lambda: client.exists_async(path, watch=fn))
            return ZkOutcome() if stat is None else _stat(stat)
        return self.run("exists", path, call)

    def create(self, path: str, data: bytes | None, ephemeral: bool) -> ZkOutcome:
        """Create, first creating missing ancestors persistent with null data."""
        def call() -> ZkOutcome:
            client = self.session.client

            def once() -> ZkOutcome:
                self.session._op("create", path, lambda: client.create_async(
                    path, data, ephemeral=ephemeral))
                owner = (self.session.session_id or 0) if ephemeral else 0
                return ZkOutcome(None, None, 0, owner)
            try:
                return once()
            except NoNodeError:
                self.session.create_persistent_parents(path)
                return once()
        return self.run("create", path, call)

    def set(self, path: str, data: bytes, version: int) -> ZkOutcome:
        def call() -> ZkOutcome:
            client = self.session.client
            stat = self.session._op("set", path, lambda: client.set_async(path, data, version))
            return _stat(stat)
        return self.run("set", path, call)

    def delete(self, path: str, version: int) -> ZkOutcome:
        """One attempt, never retried after a connection loss (``CONNECTION_LOSS``).

        A delete that reached the server before the connection dropped, retried, could
        remove the znode someone created at the same path meanwhile: a new znode starts
        again at version 0, so the version does not protect it.  The caller reads the
        znode again (is it still ours?) before deleting once more."""
        return self.begin("delete", path, version)()

    # -- pipelining ----------------------------------------------------------------------------

    def begin(self, kind: str, path: str, *args: Any) -> Callable[[], ZkOutcome]:
        """Send one request now, without waiting; returns what waits for its outcome.

        Requests begun one after the other reach ZooKeeper in that order on the one
        connection, so a batch costs one round trip instead of one per request.  The first
        attempt is this asynchronous one; if the connection drops under it, the request is
        done again the blocking way (`get`, `children`... with the session's retries) --
        except a delete, which answers ``CONNECTION_LOSS`` (see `delete`).  ``kind``: get,
        children, exists, create, set or delete; ``args`` as those methods take them."""
        client = self.session.client
        try:
            if kind == "get":
                pending = client.get_async(path)
            elif kind == "children":
                watch = self._watcher(path, CHILDREN) if args[0] else None
                pending = client.get_children_async(path, watch=watch)
            elif kind == "exists":
                watch = self._watcher(path, EXISTS) if args[0] else None
                pending = client.exists_async(path, watch=watch)
            elif kind == "create":
                pending = client.create_async(path, args[0], ephemeral=args[1])
            elif kind == "set":
                pending = client.set_async(path, args[0], args[1])
            elif kind == "delete":
                pending = client.delete_async(path, args[0])
            else:
                raise ValueError(f"unknown request kind {kind!r}")
        except Exception as exc:  # refused before sending (bad path, closed client...)
            refused = ZkOutcome("OTHER", message=f"delete {path}: {exc!r}")
            if kind == "delete":
                return lambda: refused
            return lambda: self._blocking(kind, path, args)
        timeout = self.session.operation_timeout_ms / 1000.0

        def finish() -> ZkOutcome:
            try:
                value = pending.get(timeout=timeout)
            except NoNodeError:
                if kind in ("children", "create") and (kind == "create" or args[0]):
                    return self._blocking(kind, path, args)  # parents / existence watch
                return ZkOutcome("NO_NODE")
            except _ANSWERS as exc:
                return ZkOutcome(_ANSWER_CODES[type(exc)])
            except ConnectionClosedError as exc:
                return ZkOutcome("CONNECTION_LOSS", message=f"{kind} {path}: {exc!r}")
            except KazooSessionExpiredError as exc:
                return ZkOutcome("SESSION_EXPIRED", message=f"{kind} {path}: {exc!r}")
            except (ConnectionLoss, OperationTimeoutError) as exc:
                if kind == "delete":
                    return ZkOutcome("CONNECTION_LOSS", message=f"delete {path}: {exc!r}")
                return self._blocking(kind, path, args)
            except KazooException as exc:
                return ZkOutcome("OTHER", message=f"{kind} {path}: {type(exc).__name__} {exc}")
            except Exception as exc:  # the handler's timeout: no answer, outcome unknown
                return ZkOutcome("CONNECTION_LOSS", message=f"{kind} {path}: {exc!r}")
            return _outcome(kind, value, self.session.session_id if kind == "create" and
                            args[1] else 0)

        return finish

    def _blocking(self, kind: str, path: str, args: tuple[Any, ...]) -> ZkOutcome:
        method: Callable[..., ZkOutcome] = getattr(self, kind)
        return method(path, *args)


def _outcome(kind: str, value: Any, owner: int | None) -> ZkOutcome:
    """The outcome of a successful asynchronous request (see `ZkRequests.begin`)."""
    if kind == "get":
        data, stat = value
        return _stat(stat, None if data is None else bytes(data))
    if kind == "children":
        return ZkOutcome(children=tuple(sorted(value)))
    if kind in ("exists", "set"):
        return ZkOutcome() if value is None else _stat(value)
    if kind == "create":
        return ZkOutcome(None, None, 0, owner or 0)
    return ZkOutcome()
