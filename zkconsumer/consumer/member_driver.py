"""`MemberDriver`: runs the member's pure machine in production.

One thread (``<consumer id>_watcher_executor``) owns the `MemberMachine`: it takes events
from one queue, feeds them to ``handle`` with the monotonic clock, and executes the commands
it gets back.  Every other thread only *posts* events: kazoo's connection thread (session
states), kazoo's event thread (watches), the ZooKeeper worker (replies), fetchers (resets,
parked partitions) and the application (commit, check, close, rebalance requests).  Nothing
blocks the machine's thread on ZooKeeper: requests go, in order, to one worker thread
(``<consumer id>-zk``, so the session sees them FIFO) which runs them through
`zkconsumer.zk.requests` and posts the replies.  A close therefore never waits for a
backoff, a retry or a hung ZooKeeper: the machine handles it at once and the driver bounds
the final commit and the session close by the caller's deadline.

Listeners run on the machine's thread (``on_revoked`` before the commit of a release; acks
made inside it are fed to the machine before it commits).  Acks themselves never go through
the queue: `FetcherPool.changed_acks` is read before every event that may lead to a commit.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from zkconsumer.consumer.delivery import Delivery
from zkconsumer.consumer.fetcher_pool import FetcherPool
from zkconsumer.consumer.member_commands import (
    AddPartitions,
    AssignmentChecked,
    CancelTimer,
    CloseSession,
    Command,
    CommitDone,
    Create,
    Delete,
    DropPartitions,
    Exists,
    GetChildren,
    GetData,
    NotifyAssigned,
    NotifyRevoked,
    NotifyState,
    PauseDelivery,
    RecordCommitted,
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
    AssignmentCheckRequested,
    CloseRequested,
    CommitRequested,
    Connection,
    ConnState,
    Done,
    Event,
    FetcherParked,
    OffsetReset,
    RebalanceRequested,
    Start,
    Stat,
    TimerFired,
    TimerName,
    WatchFired,
    WatchKind,
    ZkError,
    ZkReply,
)
from zkconsumer.consumer.member_machine import MemberMachine
from zkconsumer.consumer.message import ConsumerListener, PartitionState
from zkconsumer.errors import ConsumerError, ZkConsumerError, ZooKeeperError
from zkconsumer.zk.requests import ZkOutcome, ZkRequests
from zkconsumer.zk.session import SessionState, ZkSession

__all__ = ["MemberDriver", "run_request"]

log = logging.getLogger(__name__)

_STOP = object()


class _Answer:
    """A one-shot answer the machine's thread gives to a waiting caller."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.value: Any = None

    def set(self, value: Any) -> None:
        self.value = value
        self._done.set()

    def wait(self, timeout: float | None) -> bool:
        return self._done.wait(timeout)


class MemberDriver:
    """See the module docstring.  Owned by `GroupConsumer`."""

    def __init__(self, machine: MemberMachine, session: ZkSession, pool: FetcherPool,
                 delivery: Delivery, listeners: list[ConsumerListener], *,
                 clock: Callable[[], float]) -> None:
        self.machine = machine
        self.session = session
        self.pool = pool
        self.delivery = delivery
        self.listeners = listeners
        self.consumer_id = machine.config.consumer_id
        self._clock = clock
        self._events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._requests: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._zk = ZkRequests(session, self._on_watch)
        self._local: deque[Event] = deque()
        self._timers: dict[TimerName, float] = {}
        self._answers: dict[Any, _Answer] = {}
        self._start_answer = _Answer()
        self._tokens = itertools.count(1)
        self._close_deadline: float | None = None
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._zk_thread: threading.Thread | None = None
        self.public_state = "STARTING"
        self.watches_armed = False

    # -- API for GroupConsumer (any thread) ----------------------------------------------------

    def post(self, event: Event) -> None:
        self._events.put(event)

    def start(self) -> None:
        """Start the threads, join the group; raises what the first rebalance raised."""
        self.launch()
        self.wait_started()

    def launch(self) -> None:
        """Start the threads and post `Start` (returns at once).  From then on `close`
        posts its event instead of running the close inline: `GroupConsumer` launches under
        the lock its close takes, so a close from another thread is one or the other."""
        self.session.add_state_listener(self._on_session_state)
        self._answers.setdefault("start", self._start_answer)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"{self.consumer_id}_watcher_executor")
        self._zk_thread = threading.Thread(target=self._zk_run, daemon=True,
                                           name=f"{self.consumer_id}-zk")
        self._zk_thread.start()
        self._thread.start()
        self.post(Start(self.session.session_id or 0))

    def wait_started(self) -> None:
        """Wait for the first rebalance; raises what it raised (or the close that ended it)."""
        assert self._thread is not None, "launch() first"
        answer = self._start_answer
        while not answer.wait(0.5):
            if not self._thread.is_alive():
                raise ConsumerError(f"{self.consumer_id}: the member's thread ended")
        if answer.value is not None:
            raise answer.value

    def commit(self, timeout: float | None) -> int:
        """Failures of a commit of every changed acknowledged offset (see GroupConsumer)."""
        token = next(self._tokens)
        answer = self._answers.setdefault(("commit", token), _Answer())
        deadline = None if timeout is None else self._clock() + timeout
        self.post(CommitRequested(token, deadline))
        if not self._wait(answer, timeout):
            return len([s for s in self.pool.states().values()
                        if s.acked_offset != s.committed_offset])
        return int(answer.value)

    def check_assignment(self) -> list[str]:
        token = next(self._tokens)
        answer = self._answers.setdefault(("check", token), _Answer())
        self.post(AssignmentCheckRequested(token))
        timeout = self.session.operation_timeout_ms / 1000.0 + 5.0
        if not self._wait(answer, timeout):
            self._answers.pop(("check", token), None)
            raise ZooKeeperError(f"{self.consumer_id}: no assignment check within {timeout}s")
        drift, error = answer.value
        if error is not None:
            raise error
        return list(drift)

    def close(self, timeout: float | None) -> bool:
        """Leave the group; True once the session is closed -- or, called from a listener
        (the machine's own thread), once the close is under way -- False: gave up waiting."""
        deadline = None if timeout is None else self._clock() + timeout
        if self._thread is None:  # never started: run the close inline
            self._close_deadline = deadline
            self._feed(CloseRequested(deadline))
            return self._closed.is_set()
        self.post(CloseRequested(deadline))
        if self._thread is threading.current_thread():
            return True  # handled as soon as the listener returns
        self._closed.wait(None if timeout is None else timeout + 0.5)
        return self._closed.is_set()

    def _wait(self, answer: _Answer, timeout: float | None) -> bool:
        end = None if timeout is None else self._clock() + timeout + 0.5
        while True:
            left = 0.5 if end is None else min(0.5, end - self._clock())
            if answer.wait(max(0.0, left)):
                return True
            if self._closed.is_set() or (end is not None and self._clock() >= end):
                return answer.wait(0)

    # -- producers of events (other threads) ---------------------------------------------------

    def _on_session_state(self, state: SessionState) -> None:
        # kazoo's connection thread: must not block or call ZooKeeper.
        if state is SessionState.SUSPENDED:
            self.delivery.pause()  # at once, not after the queue
            self.post(Connection(ConnState.SUSPENDED))
        elif state is SessionState.LOST:
            self.delivery.pause()
            self.post(Connection(ConnState.LOST))
        else:
            self.post(Connection(ConnState.CONNECTED, self.session.session_id))

    def _on_watch(self, path: str, kind: str) -> None:
        self.post(WatchFired(path, WatchKind(kind)))

    def on_reset(self, state: PartitionState, offset: int) -> None:
        if not state.released:
            self.post(OffsetReset(state.topic, state.name, offset))

    def on_park(self, state: PartitionState, error: BaseException) -> None:
        if not state.released:
            self.post(FetcherParked(state.topic, state.name, str(error)))

    def request_rebalance(self) -> None:
        self.post(RebalanceRequested())

    # -- the machine's thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closed.is_set():
                event = self._next()
                if event is _STOP:
                    break
                self._feed(event)
        finally:
            self._requests.put(_STOP)
            if not self._closed.is_set():
                log.error("%s: the member's thread ended before closing", self.consumer_id)
                for answer in list(self._answers.values()):
                    answer.set(ConsumerError("the member's thread ended"))

    def _next(self) -> Any:
        while True:
            if self._local:
                return self._local.popleft()
            timeout = None
            if self._timers:
                name, at = min(self._timers.items(), key=lambda item: item[1])
                timeout = at - self._clock()
                if timeout <= 0:
                    del self._timers[name]
                    return TimerFired(name)
            try:
                return self._events.get(timeout=timeout)
            except queue.Empty:
                continue

    def _feed(self, event: Event) -> None:
        if not isinstance(event, ZkReply):
            for acked in self.pool.changed_acks():
                self._handle(acked)
        if isinstance(event, CloseRequested):
            self._close_deadline = event.deadline
        self._handle(event)

    def _handle(self, event: Event) -> None:
        try:
            commands = self.machine.handle(event, self._clock())
        except Exception:
            log.exception("%s: the member's state machine failed on %r", self.consumer_id,
                          event)
            return
        for command in commands:
            try:
                self._execute(command)
            except Exception:
                log.exception("%s: executing %r failed", self.consumer_id, command)

    def _execute(self, c: Command) -> None:
        if isinstance(c, GetData | GetChildren | Exists | Create | SetData | Delete):
            self._requests.put(c)
        elif isinstance(c, SetTimer):
            self._timers[c.name] = c.at
        elif isinstance(c, CancelTimer):
            self._timers.pop(c.name, None)
        elif isinstance(c, PauseDelivery):
            self.delivery.pause()
        elif isinstance(c, ResumeDelivery):
            self.delivery.resume()
        elif isinstance(c, AddPartitions):
            self.pool.add(c.partitions)
        elif isinstance(c, RevokePartitions):
            self.pool.revoke(c.keys)
        elif isinstance(c, DropPartitions):
            self.pool.drop(c.keys)
        elif isinstance(c, StopFetchers):
            self.pool.stop_fetchers()
        elif isinstance(c, StartFetchers):
            self.pool.start_fetchers(c.brokers)
        elif isinstance(c, NotifyState):
            self.public_state = c.state
            self.notify("on_state", c.state)
        elif isinstance(c, NotifyAssigned):
            self.notify("on_assigned", c.partitions)
        elif isinstance(c, NotifyRevoked):
            log.info("%s: releasing %s", self.consumer_id, c.partitions)
            self.notify("on_revoked", c.partitions)
            self._local.extend(self.pool.changed_acks())
            self._local.append(Done(c.req))
        elif isinstance(c, RecordCommitted):
            self.pool.record_committed(c.topic, c.partition, c.offset)
        elif isinstance(c, ReportHealth):
            self.watches_armed = c.watches_armed
        elif isinstance(c, StartDone):
            self._answer("start", c.error)
        elif isinstance(c, CommitDone):
            self._answer(("commit", c.token), c.failures)
        elif isinstance(c, AssignmentChecked):
            self._answer(("check", c.token), (c.drift, c.error))
        elif isinstance(c, CloseSession):
            self._close_session()
        else:  # Multi: not emitted by the machine
            raise ConsumerError(f"unexpected command {c!r}")

    def _answer(self, key: Any, value: Any) -> None:
        answer = self._answers.pop(key, None)
        if answer is not None:
            answer.set(value)

    def notify(self, method: str, *args: object) -> None:
        for listener in list(self.listeners):
            fn = getattr(listener, method, None)
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:
                log.exception("consumer listener %r.%s failed", listener, method)

    def _left(self, cap: float | None = None) -> float | None:
        if self._close_deadline is None:
            return cap
        rest = max(0.0, self._close_deadline - self._clock())
        return rest if cap is None else min(cap, rest)

    def _close_session(self) -> None:
        """Stop fetching for good and end the session, within the close deadline."""
        self.pool.stop_fetchers()
        self.delivery.close()
        timeout = self._left()
        if timeout is None:
            self.session.close()
        else:
            closer = threading.Thread(target=self.session.close, daemon=True,
                                      name=f"zk-close-{self.consumer_id}")
            closer.start()
            closer.join(timeout)
            if closer.is_alive():
                log.warning("%s: ZooKeeper did not confirm the end of the session in time; "
                            "its ids and owner znodes vanish when it expires "
                            "(zk.sessiontimeout.ms)", self.consumer_id)
        self.pool.join_fetchers(timeout=self._left(1.0) or 0.0)
        self._closed.set()

    # -- the ZooKeeper worker ------------------------------------------------------------------

    def _zk_run(self) -> None:
        """Send every queued request at once (pipelined, in order), then post the replies
        in the same order: a batch of the machine costs one round trip."""
        while True:
            batch = [self._requests.get()]
            while len(batch) < 1000:
                try:
                    batch.append(self._requests.get_nowait())
                except queue.Empty:
                    break
            stop = _STOP in batch
            pending = [(r, begin_request(self._zk, r)) for r in batch if r is not _STOP]
            for request, finish in pending:
                self.post(_reply(request, finish))
            if stop:
                return


def run_request(zk: ZkRequests, request: Any) -> ZkReply:
    """Execute one ZooKeeper request of the machine; its reply (never raises)."""
    return _reply(request, begin_request(zk, request))


def begin_request(zk: ZkRequests, r: Any) -> Callable[[], ZkOutcome]:
    """Send one request of the machine (`ZkRequests.begin`); returns its waiter."""
    try:
        if isinstance(r, GetData):
            return zk.begin("get", r.path)
        if isinstance(r, GetChildren):
            return zk.begin("children", r.path, r.watch)
        if isinstance(r, Exists):
            return zk.begin("exists", r.path, r.watch)
        if isinstance(r, Create):
            return zk.begin("create", r.path, r.data, r.ephemeral)
        if isinstance(r, SetData):
            return zk.begin("set", r.path, r.data, r.version)
        if isinstance(r, Delete):
            return zk.begin("delete", r.path, r.version)
        raise ZkConsumerError(f"not a ZooKeeper request: {r!r}")
    except Exception as exc:  # a bug here must not leave the machine waiting
        log.exception("ZooKeeper request %r failed", r)
        failure = ZkOutcome("OTHER", message=repr(exc))
        return lambda: failure


def _reply(request: Any, finish: Callable[[], ZkOutcome]) -> ZkReply:
    try:
        outcome = finish()
    except Exception as exc:  # a bug here must not leave the machine waiting
        log.exception("ZooKeeper request %r failed", request)
        outcome = ZkOutcome("OTHER", message=repr(exc))
    return ZkReply(request.req, ZkError(outcome.error) if outcome.error else None,
                   outcome.data,
                   Stat(outcome.version, outcome.ephemeral_owner) if outcome.has_stat else None,
                   outcome.children, outcome.message)
