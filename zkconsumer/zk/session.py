"""`ZkSession`: the ZooKeeper operations Kafka 0.7 needs, with zkclient's semantics.

The Scala code talks to ZooKeeper through I0Itec zkclient plus a few ``ZkUtils`` helpers
(``createEphemeralPathExpectConflict``, ``updatePersistentPath``, ``createParentPath``...).
This module gives the same operations on top of kazoo so that the znodes we write are
indistinguishable from the ones a Scala broker or consumer writes.

Invariants:

* kazoo exceptions never leave this module: they become `ZooKeeperError`, or
  `SessionExpiredError` when the session is gone (its ephemeral znodes with it).  "No node"
  is a return value where that is the natural answer (`get`, `get_children`, `exists`,
  `delete`).
* Parent znodes are created persistent with **null** data, like zkclient's
  ``createPersistent(path, true)`` -- not with ``b""`` as kazoo's ``ensure_path`` does.
  A Scala tool reading such a znode sees ``null``, exactly as on a real 0.7 cluster.
* Every operation is bounded: it is retried across connection losses (zkclient's
  ``retryUntilConnected``) but only until ``operation_timeout_ms`` has passed, then raises.
* Data is ``bytes`` (UTF-8 of the Scala strings); formats live in `zkconsumer.zk.paths`.
* TLS/SASL/digest and the ACL of created znodes come from one `ZkSecurity`; a refused
  credential or certificate and NoAuth raise `ZooKeeperAuthError` (one line, no secret).

Threading: methods may be called from any thread, but **not** from a state listener (those
run on kazoo's connection thread; a blocking call there deadlocks).  Watch callbacks
(`zkconsumer.zk.watch`) run on kazoo's event thread and may call these methods.
"""

from __future__ import annotations

import logging
import queue
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from types import TracebackType
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    AuthFailedError,
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    SessionClosedRequireSaslError,
)
from kazoo.exceptions import SessionExpiredError as KazooSessionExpiredError

from zkconsumer.backoff import Backoff
from zkconsumer.errors import (
    ConfigurationError,
    SessionExpiredError,
    ZooKeeperAuthError,
    ZooKeeperError,
    ZooKeeperUnreachableError,
)
from zkconsumer.zk.paths import check_znode_path
from zkconsumer.zk.security import KazooLog, ZkSecurity, auth_error, explain_connect_failure
from zkconsumer.zk.startup import check_hosts_resolve

__all__ = ["SessionState", "ZkSession", "ZnodeInfo"]

log = logging.getLogger(__name__)

class SessionState(str, Enum):
    """Connection states passed to state listeners (equal to kazoo's ``KazooState`` strings).

    ``SUSPENDED``: the connection dropped; the session (and our ephemeral znodes) may still be
    alive.  ``LOST``: the session expired; every ephemeral znode of it is gone.  The next
    ``CONNECTED`` after ``LOST`` is a *new* session (see `ZkSession.add_new_session_listener`).
    """

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class ZnodeInfo:
    """A znode's data (``None`` = null data, as parents created by zkclient have) and stat."""

    data: bytes | None
    version: int
    ephemeral_owner: int  # session id owning an ephemeral znode, 0 for persistent ones
    num_children: int
    ctime_ms: int
    mtime_ms: int

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0

    @classmethod
    def of(cls, data: bytes | bytearray | None, stat: Any) -> ZnodeInfo:
        """From a kazoo get answer: the data and its ``ZnodeStat``."""
        return cls(None if data is None else bytes(data), stat.version, stat.ephemeralOwner,
                   stat.numChildren, stat.ctime, stat.mtime)


# Errors that mean "try again once the connection is back" (zkclient retryUntilConnected).
_RETRIABLE = (ConnectionLoss, OperationTimeoutError)
# kazoo errors a caller handles itself; everything else is translated by _op.
_PASS = (NoNodeError, NodeExistsError, NotEmptyError, BadVersionError)


class ZkSession:
    """One ZooKeeper session (a `KazooClient`), the chroot taken from the connect string.

    ``connect`` is a ZooKeeper connect string, e.g. ``"zk1:2181,zk2:2181/kafka"``.
    ``session_timeout_ms`` is what 0.7 calls ``zk.sessiontimeout.ms`` and
    ``connection_timeout_ms`` ``zk.connectiontimeout.ms`` (both 6000 by default in 0.7).
    """

    def __init__(self, connect: str, *, session_timeout_ms: int = 6000,
                 connection_timeout_ms: int = 6000,
                 operation_timeout_ms: int | None = None,
                 security: ZkSecurity | None = None) -> None:
        if not connect or not isinstance(connect, str):
            raise ConfigurationError(f"zk.connect: a ZooKeeper connect string is required: "
                                     f"{connect!r}")
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        # Past session + connection timeout the server has expired the session anyway.
        self.operation_timeout_ms = (operation_timeout_ms if operation_timeout_ms is not None
                                     else session_timeout_ms + connection_timeout_ms)
        if session_timeout_ms <= 0 or connection_timeout_ms <= 0:
            raise ConfigurationError("zk.sessiontimeout.ms / zk.connectiontimeout.ms must be "
                                     f"> 0: {session_timeout_ms}, {connection_timeout_ms}")
        self.security = security or ZkSecurity()
        self._kazoo_log = KazooLog()
        kazoo_kwargs = self.security.kazoo_kwargs()  # its own errors, not "invalid connect"
        try:
            self.client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0,
                                      logger=self._kazoo_log, **kazoo_kwargs)
            self._kazoo_log.attach(self.client)
        except ValueError as exc:
            raise ConfigurationError(f"zk.connect: invalid connect string {connect!r}: "
                                     f"{exc}") from exc
        self._closed = threading.Event()
        self._lost = False
        self._last_session_id: int | None = None
        self._new_session_fns: list[Callable[[], None]] = []
        self._new_session_queue: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._new_session_thread: threading.Thread | None = None
        self.client.add_listener(self._track_state)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> ZkSession:
        """Connect; `ZooKeeperError` naming the connect string if that fails in time.

        Two mistakes in a connect string get their own one-line error instead of kazoo's
        "Connection time-out" or a failure far away from the cause: a host name that does
        not resolve (checked first, so it fails at once instead of after the connection
        timeout), and a chroot (``host:port/kafka``) that does not exist -- every create
        under it would fail ("parent vanished") and every read would find nothing, so a
        tool would report an empty cluster.  The dev broker creates its chroot before it
        connects (`zkconsumer.broker.registration.ensure_chroot`); nothing else should.
        """
        check_hosts_resolve(self.connect, list(self.client.hosts))
        self.security.check_files()
        try:
            with warnings.catch_warnings():
                # kazoo's own chroot check is a Python warning on stderr (breaking JSON logs);
                # _check_chroot below says it as an error instead.
                warnings.filterwarnings("ignore", message="No chroot path exists")
                self._kazoo_log.start_client(self.client, self.connection_timeout_ms / 1000.0)
        except ZooKeeperError:
            raise  # close() from another thread ended the attempt (KazooLog.cancel)
        except Exception as exc:  # KazooTimeoutError is not a KazooException
            if why := explain_connect_failure(self.client.hosts, self.security,
                                              self._kazoo_log.problems, exc=exc):
                self.close()  # kazoo leaves its threads running when its chroot check fails
                raise ZooKeeperAuthError(why) from None
            raise ZooKeeperUnreachableError(
                f"cannot connect to ZooKeeper at {self.connect!r} within "
                f"{self.connection_timeout_ms} ms: {exc}") from exc
        self._last_session_id = self.session_id
        try:
            if self.security.sasl_user or self.security.sasl_principal:
                self.exists("/")  # SASL runs after CONNECTED: a refusal shows on the first call
            self._check_chroot()
        except BaseException:
            self.close()
            raise
        return self

    @property
    def chroot(self) -> str:
        """The chroot of the connect string (``""`` when there is none)."""
        return str(self.client.chroot or "")

    def _check_chroot(self) -> None:
        chroot = self.chroot
        if not chroot or chroot == "/":
            return
        if not self.exists("/"):
            servers = ",".join(f"{h}:{p}" for h, p in self.client.hosts)
            raise ZooKeeperError(f"ZooKeeper chroot {chroot} does not exist on {servers} "
                                 "(create it, or fix --zk / zk.connect)")

    def close(self) -> None:
        """End the session (its ephemeral znodes vanish at once).  Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._kazoo_log.cancel()  # a start() still connecting ends now
        self._new_session_queue.put(False)
        try:
            self.client.stop()
            self.client.close()
        except Exception:  # closing must not fail the caller's cleanup
            log.debug("error while closing ZooKeeper client", exc_info=True)

    def __enter__(self) -> ZkSession:
        if not self.client.connected:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return int(cid[0]) if cid else None

    # ---------------------------------------------------------------- listeners

    def add_state_listener(self, fn: Callable[[SessionState], None]) -> None:
        """Call ``fn(state)`` on every connection state change.

        ``fn`` runs on kazoo's connection thread: it must not block and must not call
        ZooKeeper (set a flag or enqueue work instead).  Exceptions are logged and dropped.
        """
        def listener(state: str) -> None:
            try:
                fn(SessionState(state))
            except Exception:
                log.exception("ZooKeeper state listener %r failed", fn)

        self.client.add_listener(listener)

    def add_new_session_listener(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` after an expired session has been replaced by a new one.

        This is zkclient's ``handleNewSession``: the moment to re-create ephemeral znodes
        (broker and consumer registrations) and re-read state.  Unlike a state listener,
        ``fn`` runs on a dedicated thread and may call ZooKeeper; calls are serialised.
        """
        self._new_session_fns.append(fn)
        if self._new_session_thread is None:
            self._new_session_thread = threading.Thread(
                target=self._run_new_session_listeners, name=f"zk-new-session-{id(self):x}",
                daemon=True)
            self._new_session_thread.start()

    def _track_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._lost = True
        elif state == KazooState.CONNECTED:
            sid = self.session_id
            new = self._lost or (self._last_session_id is not None and sid is not None
                                 and sid != self._last_session_id)
            self._lost = False
            self._last_session_id = sid
            if new and self._new_session_fns:
                log.info("ZooKeeper session expired; new session 0x%x", sid or 0)
                self._new_session_queue.put(True)

    def _run_new_session_listeners(self) -> None:
        while self._new_session_queue.get():
            for fn in list(self._new_session_fns):
                try:
                    fn()
                except Exception:
                    log.exception("new-session listener %r failed", fn)

    # ---------------------------------------------------------------- plumbing

    def _op(self, what: str, path: str, call: Callable[[], Any]) -> Any:
        """Run one kazoo ``*_async`` call, retrying across connection loss, translating errors.

        ``NoNodeError``/``NodeExistsError``/``NotEmptyError``/``BadVersionError`` are left
        to the caller.  A write retried here after a connection loss may land on a *new*
        session (the old one expired meanwhile): writes that must not outlive their session
        are made conditional (`set_if_version`), so a late retry fails instead of clobbering.
        """
        check_znode_path(what, path)
        backoff = Backoff(0.05, 1.0, sleep=self._closed.wait,
                          timeout=self.operation_timeout_ms / 1000.0)
        while True:
            try:
                return call().get(timeout=max(backoff.remaining() or 0.0, 0.001))
            except _PASS:
                raise
            except _RETRIABLE as exc:
                if not backoff.wait():  # out of time, or closed meanwhile
                    raise ZooKeeperError(f"{what} {path}: connection lost and not restored "
                                         f"within {self.operation_timeout_ms} ms") from exc
            except ConnectionClosedError as exc:  # (a subclass of kazoo's SessionExpiredError)
                raise ZooKeeperError(f"{what} {path}: ZooKeeper session is closed") from exc
            except KazooSessionExpiredError as exc:
                raise SessionExpiredError(f"{what} {path}: ZooKeeper session expired") from exc
            except (NoAuthError, AuthFailedError, SessionClosedRequireSaslError) as exc:
                raise auth_error(f"{what} {path}", exc, self.client.hosts, self.security,
                                 self._kazoo_log.problems) from None
            except KazooException as exc:
                raise ZooKeeperError(f"{what} {path}: {type(exc).__name__} {exc}") from exc
            except (ValueError, TypeError) as exc:  # kazoo's argument checks (bad path...)
                raise ZooKeeperError(f"{what} {path!r}: invalid request: {exc}") from exc
            except Exception as exc:  # the handler's timeout error
                if self._closed.is_set():
                    raise ZooKeeperError(f"{what} {path}: ZooKeeper session is closed") from exc
                raise ZooKeeperError(f"{what} {path}: no answer within "
                                     f"{self.operation_timeout_ms} ms ({exc!r})") from exc

    def _create(self, path: str, data: bytes | None, *, ephemeral: bool = False) -> None:
        # data=None sends a -1 length, i.e. a *null* value, which is what zkclient writes for
        # createPersistent(path, true) parents.  kazoo's own ensure_path/makepath would write
        # b"" instead, so parents are always made through ensure_persistent, never makepath.
        acl = self.security.acl_for(path, container=data is None)
        self._op("create", path, lambda: self.client.create_async(path, data, acl=acl,
                                                                  ephemeral=ephemeral))

    # ---------------------------------------------------------------- reads

    def exists(self, path: str) -> bool:
        return self._op("exists", path, lambda: self.client.exists_async(path)) is not None

    def get(self, path: str) -> bytes | None:
        """The znode's data; ``None`` if it does not exist, ``b""`` if its data is null."""
        node = self.get_node(path)
        if node is None:
            return None
        return node.data if node.data is not None else b""

    def get_node(self, path: str) -> ZnodeInfo | None:
        """Data (null kept as ``None``) and stat, or ``None`` if the znode does not exist."""
        try:
            data, stat = self._op("get", path, lambda: self.client.get_async(path))
        except NoNodeError:
            return None
        return ZnodeInfo.of(data, stat)

    def get_children(self, path: str) -> list[str]:
        """Child names, sorted; ``[]`` if the znode does not exist (getChildrenParentMayNotExist)."""
        try:
            children = self._op("get_children", path,
                                lambda: self.client.get_children_async(path))
        except NoNodeError:
            return []
        return sorted(children)

    # ---------------------------------------------------------------- writes

    def ensure_persistent(self, path: str) -> None:
        """Create ``path`` and its missing ancestors, persistent with null data
        (ZkUtils.makeSurePersistentPathExists / zkclient ``createPersistent(path, true)``)."""
        if path in ("", "/"):
            return
        try:
            self._create(path, None)
        except NodeExistsError:
            return
        except NoNodeError:
            self.create_persistent_parents(path)
            try:
                self._create(path, None)
            except NodeExistsError:
                return
            except NoNodeError as exc:  # an ancestor was deleted in between
                raise ZooKeeperError(f"create {path}: parent vanished while creating") from exc

    def create_persistent_parents(self, path: str) -> None:
        """Create the ancestors of ``path`` (not ``path`` itself) with null data
        (ZkUtils.createParentPath)."""
        parent = path[: path.rfind("/")]
        if parent:
            self.ensure_persistent(parent)

    def create_ephemeral_expect_conflict(self, path: str, data: bytes) -> bool:
        """Create an ephemeral znode, creating parents; Scala's createEphemeralPathExpectConflict.

        True if we created it, or if it already holds exactly ``data`` and belongs to *this*
        session (a retried create whose first answer was lost to a connection loss).  False
        if someone else holds it.  Stricter than Scala, which also accepts identical data
        owned by another session: such a znode (e.g. from a previous incarnation with the
        same consumer id whose session has not expired yet) would vanish under us later.
        """
        try:
            try:
                self._create(path, data, ephemeral=True)
            except NoNodeError:
                self.create_persistent_parents(path)
                self._create(path, data, ephemeral=True)
            return True
        except NoNodeError as exc:
            raise ZooKeeperError(f"create {path}: parent vanished while creating") from exc
        except NodeExistsError:
            node = self.get_node(path)
            if node is None:  # vanished: Scala re-throws, the caller counts it as a conflict
                return False
            if node.data == data and node.ephemeral_owner == self.session_id:
                log.info("%s exists with value %r during connection loss; this is ok",
                         path, data)
                return True
            log.info("conflict in %s: wanted %r, stored %r (owner session 0x%x)", path, data,
                     node.data, node.ephemeral_owner)
            return False

    def update_persistent(self, path: str, data: bytes) -> None:
        """Write a persistent znode, creating it and its parents if needed
        (ZkUtils.updatePersistentPath: set; on NoNode create; on NodeExists set)."""
        try:
            self._op("set", path, lambda: self.client.set_async(path, data))
            return
        except NoNodeError:
            pass
        self.create_persistent_parents(path)
        try:
            self._create(path, data)
        except NodeExistsError:
            try:
                self._op("set", path, lambda: self.client.set_async(path, data))
            except NoNodeError as exc:
                raise ZooKeeperError(f"set {path}: deleted while being written") from exc
        except NoNodeError as exc:
            raise ZooKeeperError(f"create {path}: parent vanished while creating") from exc

    def set_if_version(self, path: str, data: bytes, version: int) -> int | None:
        """Compare-and-set: write only if the znode is still at ``version``.

        Returns the new version, or ``None`` if the znode changed or vanished since (look
        again).  Safe to retry across connection losses and session expiries: a retry of a
        write that already landed sees a new version and returns ``None``, never rewrites.
        """
        try:
            stat = self._op("set", path, lambda: self.client.set_async(path, data, version))
        except (BadVersionError, NoNodeError):
            return None
        return int(stat.version)

    def create_if_absent(self, path: str, data: bytes) -> bool:
        """Create a persistent znode (and null-data parents); False if it exists already."""
        try:
            try:
                self._create(path, data)
            except NoNodeError:
                self.create_persistent_parents(path)
                self._create(path, data)
        except NodeExistsError:
            return False
        except NoNodeError as exc:
            raise ZooKeeperError(f"create {path}: parent vanished while creating") from exc
        return True

    def delete(self, path: str) -> None:
        """Delete one znode; a missing znode is fine (ZkUtils.deletePath).

        A znode with children raises `ZooKeeperError`; use `delete_recursive`."""
        try:
            self._op("delete", path, lambda: self.client.delete_async(path))
        except NoNodeError:
            pass
        except NotEmptyError as exc:
            raise ZooKeeperError(f"delete {path}: znode has children") from exc

    def delete_recursive(self, path: str) -> None:
        """Delete a znode and everything below it; missing is fine (deletePathRecursive)."""
        for _ in range(10):  # children may appear concurrently; give up after a few rounds
            for child in self.get_children(path):
                self.delete_recursive(f"{path.rstrip('/')}/{child}")
            if path in ("", "/"):
                return
            try:
                self._op("delete", path, lambda: self.client.delete_async(path))
                return
            except NoNodeError:
                return
            except NotEmptyError:
                continue
        raise ZooKeeperError(f"delete {path}: children keep appearing")
