"""`Coordinator`: registration, watches, the rebalance loop and ZooKeeper session handling.

States (reported to listeners through ``on_state``)::

    STARTING --first rebalance--> STABLE <--rebalance-- REBALANCING
                                    |  ^                     |
                      SUSPENDED <---+  +--- RESUMED          +--> REBALANCE_FAILED
                          |                                        (retried after backoff)
                          v
                    SESSION_LOST --new session: release all, commit, re-register--> REBALANCING

Rules (REFERENCE §2.1-2.4 plus the fixes asked of us):

* Registration: ephemeral ``/consumers/G/ids/<cid>`` holding the subscription's TopicCount
  exactly as Scala writes it.
* Triggers: persistent child watches (`zkconsumer.zk.watch`) on ``/consumers/G/ids``, on
  ``/brokers/topics/T`` of every topic of mine (firing when a missing one is created too) and,
  for wildcard subscriptions, on ``/brokers/topics``.  A watch callback only sets a flag and
  notifies; the coordinator thread runs one rebalance per burst (KAFKA-265).
* One attempt = read the view, compute the reference assignment, keep partitions whose
  decided thread is unchanged and whose owner znode still holds our thread id, release the
  others (stop, on_revoked, commit, delete), claim the new ones all-or-nothing, then
  (re)start one fetcher per broker.  Keeping unchanged partitions is safe: ownership is
  arbitrated by the owner znodes, and every member computes the same decision from the same
  view.  It spares unchanged partitions Scala's stop/clear/refetch churn.
* Retries: ``rebalance.retries.max`` attempts, ``rebalance.backoff.ms`` apart (injectable
  sleep), then `RebalanceFailedError` naming group, consumer id and conflicting owners.  After
  an owner conflict the backoff ends early once every conflicting owner znode is deleted
  (an exists-watch on each), so a join costs one release, not one whole backoff.  The
  first rebalance runs in `start` (the caller sees the error); a failed one from a watcher is
  retried after the backoff instead of waiting for the next ZooKeeper event.
* Session: SUSPENDED pauses delivery at once (the kazoo thread only flips a flag);
  CONNECTED on the same session resumes it; a new session (the old one expired, our
  ephemerals are gone) releases everything -- committing acknowledged offsets on the new
  session where they are ahead of the stored ones --, deletes any owner znode a request
  retried across the expiry created on the new session, re-registers and rebalances.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.delivery import Delivery
from zkconsumer.consumer.message import ConsumerListener, ConsumerStats
from zkconsumer.consumer.ownership import Conflict, Ownership, group_by_topic
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.consumer.view import read_view
from zkconsumer.errors import ConsumerError, RebalanceFailedError, ZkConsumerError
from zkconsumer.zk.paths import BROKER_TOPICS, consumer_id_path, consumer_ids_path, topic_path
from zkconsumer.zk.session import SessionState, ZkSession
from zkconsumer.zk.watch import ChildrenWatch, watch_exists

__all__ = ["Coordinator"]

log = logging.getLogger(__name__)


#: How long a parked partition waits before it is claimed afresh (re-reading its committed
#: offset, fetching again): an operator's `offsets reset` takes effect without a restart.
PARKED_RETRY_S = 30.0


class _Interrupted(Exception):
    """A session event or close arrived: abandon the rebalance in progress."""


class Coordinator:
    """See the module docstring.  Owned and driven by `GroupConsumer`."""

    def __init__(self, config: ConsumerConfig, subscription: Subscription, session: ZkSession,
                 consumer_id: str, delivery: Delivery, stats: ConsumerStats,
                 listeners: list[ConsumerListener], *,
                 sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.subscription = subscription
        self.session = session
        self.consumer_id = consumer_id
        self.group = config.group_id
        self.delivery = delivery
        self.stats = stats
        self.listeners = listeners
        self.ownership = Ownership(session, config, consumer_id, delivery, stats, clock)
        self._clock = clock
        self._closing = threading.Event()
        self._custom_sleep = sleep is not None
        self._sleep = sleep if sleep is not None else self._closing.wait
        self._cond = threading.Condition()
        self._triggered = False
        self._kick = threading.Event()  # wakes a rebalance backoff early
        self._retry_at: float | None = None
        self._parked_since: float | None = None  # see _parked_retry_due
        self._events: list[str] = []  # session events for the coordinator thread
        self._lost = False
        self._watches: dict[str, ChildrenWatch] = {}
        self._thread: threading.Thread | None = None
        self.state = "STARTING"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Register, watch, rebalance once in the caller's thread, start the loop thread."""
        self.session.add_state_listener(self._on_session_state)
        self.session.add_new_session_listener(self._on_new_session)
        self._register()
        self._watch(consumer_ids_path(self.group))
        if self.subscription.is_wildcard:
            self._watch(BROKER_TOPICS)
        for topic in self.subscription.topics:
            self._watch(topic_path(topic))
        self.rebalance(interruptible=False)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"{self.consumer_id}_watcher_executor")
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop and the watches (the caller commits and closes the session)."""
        self._closing.set()
        with self._cond:
            self._cond.notify_all()
        for w in self._watches.values():
            w.cancel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- listeners ----------------------------------------------------------------------------

    def _notify(self, method: str, *args: object) -> None:
        for listener in list(self.listeners):
            fn = getattr(listener, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:
                log.exception("consumer listener %r.%s failed", listener, method)

    def _set_state(self, state: str) -> None:
        self.state = state
        self._notify("on_state", state)

    def _on_revoked(self, partitions: dict[str, list[str]]) -> None:
        log.info("%s: releasing %s", self.consumer_id, partitions)
        self._notify("on_revoked", partitions)

    # -- registration and watches -------------------------------------------------------------

    def _register(self) -> None:
        """Create our ids znode.  If another session holds it (a previous incarnation with
        the same configured ``consumerid`` that died moments ago), wait for that session to
        expire -- up to 1.5 x ``zk.sessiontimeout.ms`` -- instead of adopting a znode that
        would vanish under us later."""
        path = consumer_id_path(self.group, self.consumer_id)
        value = self.subscription.registration()
        deadline = self._clock() + 1.5 * self.config.zk_session_timeout_ms / 1000.0 + 1.0
        while not self.session.create_ephemeral_expect_conflict(path, value):
            if self._clock() > deadline or self._closing.is_set():
                raise ConsumerError(f"consumer id {self.consumer_id} is already registered in "
                                    f"group {self.group} by another live session ({path} = "
                                    f"{self.session.get(path)!r})")
            log.warning("%s is held by another session; waiting for it to expire", path)
            self._closing.wait(0.25)
        log.info("registered %s = %s", path, value.decode())

    def _watch(self, path: str) -> None:
        if path not in self._watches:
            self._watches[path] = ChildrenWatch(self.session, path, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        # kazoo's event thread: just flag and wake the coordinator thread.
        self.request_rebalance()

    def request_rebalance(self) -> None:
        with self._cond:
            self._triggered = True
            self._cond.notify_all()
        self._kick.set()

    # -- session ------------------------------------------------------------------------------

    def _on_session_state(self, state: SessionState) -> None:
        # kazoo's connection thread: must not block or call ZooKeeper.
        if state == SessionState.SUSPENDED:
            self.delivery.pause()
            self._push("SUSPENDED")
        elif state == SessionState.LOST:
            self._lost = True
            self.delivery.pause()
            self._push("SESSION_LOST")
        elif state == SessionState.CONNECTED and not self._lost:
            self.delivery.resume()
            self._push("RESUMED")

    def _on_new_session(self) -> None:
        self._lost = True  # in case LOST was never reported (session id simply changed)
        self.delivery.pause()
        self._push("NEW_SESSION")

    def _push(self, event: str) -> None:
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()

    def _handle_event(self, event: str) -> None:
        if event == "NEW_SESSION":
            self._recover_session()
        elif event == "RESUMED":
            self._set_state("RESUMED")
            self.request_rebalance()  # verify our owner znodes; replays missed changes
        else:
            self._set_state(event)

    def _handle_events_inline(self) -> None:
        """Handle pending session events in the calling thread (see `rebalance`)."""
        with self._cond:
            events, self._events = self._events, []
        for event in events:
            try:
                self._handle_event(event)
            except ZkConsumerError:
                with self._cond:  # not recovered yet: try again before the next attempt
                    self._events.insert(0, event)
                raise

    def _recover_session(self) -> None:
        """Our ephemerals died with the old session: release all, re-register, rebalance."""
        self.stats.session_expirations += 1
        log.warning("%s: ZooKeeper session expired; releasing all partitions and rejoining",
                    self.consumer_id)
        own = self.ownership
        own.stop_fetchers()
        own.release(list(own.states()), self._on_revoked, delete_owners=False,
                    forward_only=True)
        # An owner create retried across the expiry may sit on this session: drop it.
        own.delete_session_leftovers()
        self._lost = False
        self.delivery.resume()
        self._register()
        self.request_rebalance()

    # -- the loop -----------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closing.is_set():
            with self._cond:
                while not (self._closing.is_set() or self._events or self._triggered
                           or self._retry_due() or self._parked_retry_due()):
                    timeout = 1.0
                    if self._retry_at is not None:
                        timeout = max(0.0, min(timeout, self._retry_at - self._clock()))
                    self._cond.wait(timeout)
                if self._closing.is_set():
                    return
                events, self._events = self._events, []
                if self._retry_due():
                    self._retry_at = None
                    self._triggered = True
                run = self._triggered
            try:
                for event in events:
                    self._handle_event(event)
                if run:
                    self.rebalance()
            except _Interrupted:
                continue
            except RebalanceFailedError as exc:
                backoff = self.config.rebalance_backoff_ms / 1000.0
                log.error("%s; retrying in %.1fs", exc, backoff)
                self._set_state("REBALANCE_FAILED")
                with self._cond:
                    self._retry_at = self._clock() + backoff
            except ZkConsumerError as exc:
                log.error("%s: session recovery failed (%s); retrying", self.consumer_id, exc)
                with self._cond:
                    self._events.insert(0, "NEW_SESSION")
                self._closing.wait(self.config.rebalance_backoff_ms / 1000.0)
            except Exception:
                log.exception("%s: unexpected error in the coordinator", self.consumer_id)
                with self._cond:
                    self._retry_at = self._clock() + self.config.rebalance_backoff_ms / 1000.0

    def _parked_retry_due(self) -> bool:
        """True (and a rebalance requested) once a partition stayed parked for
        `PARKED_RETRY_S`: its re-claim retries it (with cond held)."""
        parked = any(s.error is not None for s in self.ownership.states().values())
        now = self._clock()
        if not parked:
            self._parked_since = None
            return False
        if self._parked_since is None:
            self._parked_since = now
        if now - self._parked_since < PARKED_RETRY_S:
            return False
        self._parked_since = None
        self._triggered = True
        log.info("%s: retrying parked partition(s)", self.consumer_id)
        return True

    def _retry_due(self) -> bool:
        return self._retry_at is not None and self._clock() >= self._retry_at

    def _check_interrupt(self) -> None:
        if self._closing.is_set() or self._events:
            raise _Interrupted()

    # -- rebalance ----------------------------------------------------------------------------

    def rebalance(self, *, interruptible: bool = True) -> None:
        """Up to ``rebalance.retries.max`` attempts; `RebalanceFailedError` if all fail.

        On the coordinator thread (``interruptible``) a pending session event or close
        abandons the retries (`_Interrupted`) so the event is handled first.  A backoff cut
        short by a new ZooKeeper event (the group changed again) does not count as a retry:
        Scala would run a fresh ``syncedRebalance`` for that event; the total number of
        attempts is still capped (5 x ``rebalance.retries.max``).

        The first rebalance runs in `start`'s thread, before the coordinator thread exists:
        session events arriving meanwhile (an expiry during a slow first join) are handled
        there, before each attempt -- nobody else would, and every attempt on the lost
        session would fail until the retries ran out.
        """
        started = self._clock()
        self._set_state("REBALANCING")
        conflicts: list[Conflict] = []
        error: BaseException | None = None
        retries = self.config.rebalance_retries_max
        attempt = total = 0
        while True:
            attempt += 1
            total += 1
            with self._cond:
                self._triggered = False
                self._retry_at = None
            self.stats.rebalance_attempts += 1
            try:
                if not interruptible:
                    self._handle_events_inline()
                conflicts = self._attempt()
                error = None
            except ZkConsumerError as exc:
                log.warning("%s: rebalance attempt %d/%d failed: %s", self.consumer_id, attempt,
                            retries, exc)
                conflicts, error = [], exc
            if not conflicts and error is None:
                self.stats.rebalances += 1
                self.stats.last_rebalance_duration = self._clock() - started
                log.info("%s: rebalanced in %.3fs (attempt %d), owning %s", self.consumer_id,
                         self._clock() - started, total, self.ownership.owned())
                self._set_state("STABLE")
                return
            if conflicts:
                log.info("%s: rebalance attempt %d/%d: partitions still owned by others: %s",
                         self.consumer_id, attempt, retries, _describe(conflicts))
            if attempt >= retries or total >= 5 * retries:
                break
            if interruptible:
                self._check_interrupt()
            if self._backoff(conflicts):
                attempt -= 1
            if interruptible:
                self._check_interrupt()
            elif self._closing.is_set():
                break
        self.stats.failed_rebalances += 1
        detail = (f"conflicting owners: {_describe(conflicts)}" if conflicts
                  else f"last error: {error}")
        raise RebalanceFailedError(
            f"{self.consumer_id} can't rebalance after {attempt} retries "
            f"(group {self.group}; {detail})") from error

    def _backoff(self, conflicts: list[Conflict]) -> bool:
        """Wait ``rebalance.backoff.ms`` -- or less; True if a ZooKeeper event ended it.

        The wait ends early when every conflicting owner znode is gone (an exists-watch on
        each): the usual conflict is a member that has not released yet because it reacts to
        the same event we do, so we retry the moment it did.  It also ends when a watch
        fires (the group changed: our decision is stale and may block others).  A stale
        owner (a dead member whose session has not expired) costs the full backoff.
        """
        seconds = self.config.rebalance_backoff_ms / 1000.0
        if self._custom_sleep:
            self._sleep(seconds)
            return False
        self._kick.clear()
        remaining = {path for path, _ in conflicts}
        lock = threading.Lock()

        def deleted(path: str) -> None:
            with lock:
                remaining.discard(path)
                if not remaining:
                    self._kick.set()

        for path in sorted(remaining):
            exists = watch_exists(self.session, path, functools.partial(deleted, path))
            if exists is None:  # connection trouble: wait the whole backoff
                remaining.add("")
                break
            if not exists:
                deleted(path)
        deadline = self._clock() + seconds
        while not self._closing.is_set():
            if self._triggered:
                return True
            if conflicts and not remaining:
                return False
            left = deadline - self._clock()
            if left <= 0:
                return False
            self._kick.wait(min(left, 0.1))
            self._kick.clear()
        return False

    def _attempt(self) -> list[Conflict]:
        """One rebalance attempt; returns the owner conflicts ([] = success)."""
        if self._lost:
            raise ConsumerError("ZooKeeper session lost; waiting for a new one")
        if not self.session.exists(consumer_id_path(self.group, self.consumer_id)):
            # Deleted behind our back (an admin tool removing the group) while our session
            # lives on: we are still a member, so register again.
            self._register()
        view = read_view(self.session, self.group, self.consumer_id, self.subscription)
        for topic in view.my_threads:
            self._watch(topic_path(topic))
        # partitions of brokers missing from /brokers/ids cannot be fetched: not claimed
        # (logged once), the rest of the decision goes ahead (see consumer/view.py)
        decision = view.assignable(view.decide(), self.group, self.consumer_id)
        own = self.ownership
        current = own.states()
        # a parked partition (corrupt data, misaligned or unreadable offset...) is claimed
        # afresh: it re-reads its committed offset, which an operator may have fixed
        keep = {k for k, s in current.items()
                if decision.get(k) == s.thread_id and s.error is None}
        keep -= set(own.verify(keep))
        revoke = [k for k in current if k not in keep]
        new = {k: t for k, t in decision.items() if k not in keep}
        if not revoke and not new:
            if not own.fetchers_match(view.brokers):
                own.start_fetchers(view.brokers)
            return []
        own.stop_fetchers()
        if revoke:
            own.release(revoke, self._on_revoked)
        conflicts = own.claim(new) if new else []
        if new and not conflicts:
            # before the fetchers start: a listener hears of a partition before any of its
            # messages can be handed out
            log.info("%s: claimed %s", self.consumer_id, group_by_topic(new))
            self._notify("on_assigned", group_by_topic(new))
        own.start_fetchers(view.brokers)
        return conflicts


    # -- self-checks (any thread; read by health checks) ------------------------------------

    def watches_armed(self) -> bool:
        """True if every ZooKeeper watch of the member is armed on the current connection.

        False for a moment after every reconnect (the watches re-arm themselves); for longer,
        the member is deaf to joins, leaves and new partitions."""
        return all(w.armed for w in list(self._watches.values()))

    def check_assignment(self) -> list[str]:
        """Where what this member owns differs from the reference decision of the group as
        ZooKeeper shows it now ([] = they agree).  Raises `ZkConsumerError` if unreadable.

        During a rebalance the two differ for a moment; a difference that lasts means the
        member missed a change (it is deaf, or its rebalances keep failing).
        """
        view = read_view(self.session, self.group, self.consumer_id, self.subscription)
        # as _attempt decides: partitions of unregistered brokers are never claimed
        decision = view.assignable(view.decide(), self.group, self.consumer_id)
        owned = {key: state.thread_id for key, state in self.ownership.states().items()}
        drift = [f"{topic}/{name} is assigned to {thread} but not owned"
                 for (topic, name), thread in sorted(decision.items())
                 if owned.get((topic, name)) != thread]
        drift += [f"{topic}/{name} is owned but assigned to another member"
                  for (topic, name) in sorted(owned) if (topic, name) not in decision]
        return drift


def _describe(conflicts: list[Conflict]) -> str:
    return ", ".join(f"{path}={value.decode('utf-8', 'replace') if value else None}"
                     for path, value in conflicts)
