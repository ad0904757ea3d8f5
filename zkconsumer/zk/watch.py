"""Persistent child watches with zkclient's semantics (``subscribeChildChanges``).

ZooKeeper watches fire once; zkclient re-arms them and -- unlike kazoo's ``ChildrenWatch``,
which silently stops when the path does not exist -- also fires when a *missing* path is
created.  Kafka 0.7 relies on that: a consumer subscribes to ``/brokers/topics/<t>`` before
any broker has the topic, and the producer watches ``/brokers/topics`` on an empty cluster.

How: if ``get_children(path, watch)`` says "no node", we arm an ``exists(path, watch)``
watch instead, which ZooKeeper fires on creation; every firing re-reads and re-arms.  After a
session expiry every server-side watch is gone, so the watch re-arms (and reports the current
children) on the next ``CONNECTED``.

A connection loss that *keeps* the session (a network blip, a ZooKeeper restart, an ensemble
fail-over: ``SUSPENDED`` then ``CONNECTED``) is just as destructive for us: kazoo drops every
watcher it holds when the connection goes (notifying them with a ``NONE`` event), so without
a re-arm the watch would stay deaf for the rest of the session.  Every ``SUSPENDED`` or
``LOST`` therefore starts a new *connection epoch*; the watch is armed only while its last
successful read happened in the current epoch, and the next ``CONNECTED`` re-reads (and
re-arms) every watch that is not.

Invariants:

* The callback is called once at start and after every change event, with the current
  sorted children (``[]`` when the path does not exist).  Events may be coalesced or
  repeated (never lost): callers treat a call as "re-read", like zkclient listeners.
* Calls are serialised and run on kazoo's event thread: keep them short (set a flag, wake a
  thread).  A raising callback is logged; the watch stays armed.
* `armed` is True only when a server-side watch of the current connection is in place:
  a re-arm after a reconnect is followed by one callback, so a caller that re-reads on
  every call (the consumer's rebalance, the producer's broker list) catches up on every
  change it missed while disconnected.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import WatchedEvent

from zkconsumer.zk.session import ZkSession

__all__ = ["ChildrenWatch", "watch_children", "watch_exists"]

log = logging.getLogger(__name__)


class ChildrenWatch:
    """Call ``callback(children)`` now and whenever ``path``'s children change or ``path``
    is created or deleted.  `cancel` stops it."""

    def __init__(self, session: ZkSession, path: str,
                 callback: Callable[[list[str]], Any]) -> None:
        self.session = session
        self.path = path
        self._callback = callback
        self._lock = threading.RLock()
        self._cancelled = False
        # Connection epochs: bumped by the state listener on every SUSPENDED/LOST (only that
        # thread writes it); `_armed_epoch` is the epoch in which the last successful read
        # -- which placed the server-side watch -- began.
        self._epoch = 0
        self._armed_epoch = -1
        session.client.add_listener(self._on_state)
        self._refresh()

    def cancel(self) -> None:
        """Stop calling back.  (A one-shot server-side watch may stay armed; it is ignored.)"""
        with self._lock:
            self._cancelled = True
        self.session.client.remove_listener(self._on_state)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def armed(self) -> bool:
        """True while a watch placed on the current connection is waiting for a change."""
        return (not self._cancelled and self._armed_epoch == self._epoch
                and self.session.client.connected)

    def _read(self) -> list[str]:
        client = self.session.client
        while True:
            try:
                return sorted(client.get_children(self.path, watch=self._on_event))
            except NoNodeError:
                pass
            # Missing: watch for its creation.  If it was created in between, read again.
            if client.exists(self.path, watch=self._on_event) is None:
                return []

    def _refresh(self) -> None:
        with self._lock:
            if self._cancelled:
                return
            epoch = self._epoch  # read first: a loss during the read leaves us unarmed
            try:
                children = self._read()
            except KazooException as exc:
                # Connection trouble: the next CONNECTED re-arms us.
                log.info("watch on %s not armed (%s); will retry on reconnect",
                         self.path, type(exc).__name__)
                return
            self._armed_epoch = epoch
            try:
                self._callback(children)
            except Exception:
                log.exception("children callback for %s failed", self.path)

    def _on_event(self, event: WatchedEvent) -> None:
        # NONE: kazoo dropped its watchers (connection or session gone); `_on_state` has
        # already started a new epoch and re-arms on the next CONNECTED.
        if event.type != "NONE":
            self._refresh()

    def _on_state(self, state: str) -> None:
        # Runs on the connection thread: never call ZooKeeper (nor take our lock, held
        # across ZooKeeper reads) here; hand off instead.
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._epoch += 1
        elif (state == KazooState.CONNECTED and self._armed_epoch != self._epoch
              and not self._cancelled):
            self.session.client.handler.spawn(self._refresh)


def watch_children(session: ZkSession, path: str,
                   callback: Callable[[list[str]], Any]) -> ChildrenWatch:
    """Subscribe ``callback`` to the children of ``path`` (which may not exist yet)."""
    return ChildrenWatch(session, path, callback)


def watch_exists(session: ZkSession, path: str, on_event: Callable[[], Any]) -> bool | None:
    """Does ``path`` exist?  None when ZooKeeper could not say (connection trouble).

    When it answered, a one-shot watch calls ``on_event()`` on the next event of that node
    (created, deleted, changed, or the connection lost): the caller re-checks.  For waits on
    another member's znode (the consumer's rebalance backoff) without kazoo outside `zk`.
    """
    try:
        stat = session.client.exists(path, watch=lambda _event: on_event())
    except KazooException:
        return None
    return stat is not None
