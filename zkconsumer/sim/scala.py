"""A Scala 0.7.2 ``ZookeeperConsumerConnector`` as a simulated process (REFERENCE §2).

Modelled from ``kafka/consumer/ZookeeperConsumerConnector.scala`` (tag
kafka-0.7.2-incubating-candidate-5), thread by thread:

* **main**: register the ids znode (``createEphemeralPathExpectConflict``), subscribe child
  listeners on ``/consumers/G/ids`` and ``/brokers/topics/<t>``, then ``syncedRebalance``;
  a `ConsumerRebalanceFailedException` here reaches the application, which exits
  (``gave_up``, the process dies without closing its session).
* **zkclient event thread**, one task after another: a child change re-arms the watch
  and sets ``isWatcherTriggered``; a new session (the old one expired) runs
  ``handleNewSession`` -- ``resetState`` (forget the registry, fetchers keep running),
  re-register, ``syncedRebalance`` -- and then fires every child listener; a reconnect on
  the same session restores the watches (the Java client's SetWatches) and fires those
  whose children changed meanwhile.  Fetching continues while disconnected.
* **watcher executor**: one ``syncedRebalance`` per burst of triggers; failures are logged
  (``gave_up`` counts them) and the member then owns nothing until the next event.
* **autocommit**: every ``autocommit.interval.ms``, ``commitOffsets`` of the registry,
  without the rebalance lock (the reference race is kept).

``syncedRebalance``: up to ``rebalance.retries.max`` attempts under ``rebalanceLock``; each
reads the cluster, the own topic count, every member's topic count and the partitions,
stops the fetchers and clears the queues, commits, deletes its owner znodes, reads the
offsets of the decided partitions, creates every owner znode (a conflict rolls back all
created ones) and starts the fetchers; a failed attempt stops fetchers, commits and sleeps
``rebalance.backoff.ms``.  zkclient retries every call across connection losses and
expiries (``retryUntilConnected``), so no call here ever sees them.
"""

from __future__ import annotations

from typing import Any

from zkconsumer.consumer.assignment import assign, java_order
from zkconsumer.consumer.member_commands import Create, Delete, GetChildren, GetData, SetData
from zkconsumer.consumer.member_events import ConnState, Key, WatchKind, ZkError, ZkReply
from zkconsumer.errors import ZkConsumerError
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.loop import Loop
from zkconsumer.sim.threads import WAIT_CONNECTED, Lock, Signal, Step, Threads
from zkconsumer.sim.world import Cluster, Feed, MemberProcess, Observer
from zkconsumer.sim.zk import ZooKeeper
from zkconsumer.zk.paths import (
    TopicCount,
    consumer_id_path,
    consumer_ids_path,
    offset_path,
    owner_path,
    parse_partition_count,
    parse_topic_count,
    topic_path,
)

__all__ = ["ScalaConfig", "ScalaMember"]


class ScalaConfig:
    """The 0.7.2 defaults that matter to the group (REFERENCE §3)."""

    session_timeout = 6.0
    retries = 4
    backoff = 2.0
    autocommit_interval = 10.0


class _Fail(Exception):
    """An attempt failed with an exception ("exception during rebalance")."""


class _Info:
    """A ``PartitionTopicInfo``: the consumed offset the iterator advances."""

    __slots__ = ("consumed",)

    def __init__(self, consumed: int) -> None:
        self.consumed = consumed


class ScalaMember(MemberProcess):
    """One Scala 0.7.2 consumer process (see the module docstring)."""

    kind = "scala"

    def __init__(self, loop: Loop, zk: ZooKeeper, cluster: Cluster, observer: Observer,
                 group: str, consumer_id: str, topics: dict[str, int],
                 config: ScalaConfig | None = None) -> None:
        super().__init__(loop, consumer_id)
        self.group = group
        self.config = config or ScalaConfig()
        self.topic_count = TopicCount.static(topics)
        self.threads = Threads(loop, self.proc)
        self.client = ZkClient(zk, self.proc, self.config.session_timeout,
                               self.threads.on_reply, self._on_watch, self._on_state)
        self.threads.client = self.client
        self.feed = Feed(loop, cluster, self.proc, consumer_id, observer, self._consumed,
                         ack_delay=None)
        self.registry: dict[Key, _Info] = {}
        self.fetching: dict[Key, _Info] = {}
        self.lock = Lock(self.threads)
        self.triggered = Signal(self.threads)
        self.watched: dict[str, tuple[str, ...] | None] = {}
        self._events: list[Step] = []
        self._event_busy = False
        self._session: int | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        self.client.connect()
        self.threads.spawn("main", self._main(), self._main_done)
        self.threads.spawn("autocommit", self._autocommit())
        self.threads.spawn("watcher", self._watcher())

    def terminate(self, deadline: float) -> None:
        """SIGTERM with a shutdown hook: ``shutdown()`` -- stop fetchers, commit, close."""
        self.threads.spawn("shutdown", self._shutdown())
        self.kill_at(deadline)

    def _shutdown(self) -> Step:
        self.feed.stop()
        yield from self._commit()
        self.threads.stop_all()
        self.exit()

    def owned(self) -> list[Key]:
        return self.feed.active()

    def watches(self) -> list[str]:
        return [consumer_ids_path(self.group)] + [topic_path(t) for t, _ in
                                                   self.topic_count.counts]

    # -- zookeeper helpers (zkclient) ----------------------------------------------------------

    def _zk(self, make: Any, *args: Any) -> Step:
        """One zkclient call: retried across connection loss and expiry until answered."""
        while True:
            reply: ZkReply = yield make(self.threads.req(), *args)
            if reply.error in (ZkError.CONNECTION_LOSS, ZkError.SESSION_EXPIRED):
                yield WAIT_CONNECTED
                continue
            return reply

    def _read(self, path: str) -> Step:
        reply = yield from self._zk(GetData, path)
        if reply.error is not None:
            raise _Fail(f"{path}: {reply.error.value}")
        return reply.data

    def _children(self, path: str, watch: bool = False) -> Step:
        reply = yield from self._zk(GetChildren, path, watch)
        return () if reply.error is not None else reply.children

    def _create_expect_conflict(self, path: str, data: bytes) -> Step:
        """``createEphemeralPathExpectConflict``: True if created (or ours already)."""
        reply = yield from self._zk(Create, path, data, True)
        if reply.error is None:
            return True
        if reply.error is not ZkError.NODE_EXISTS:
            raise _Fail(f"{path}: {reply.error.value}")
        stored = yield from self._zk(GetData, path)
        return stored.error is None and stored.data == data

    # -- threads -------------------------------------------------------------------------------

    def _main(self) -> Step:
        yield WAIT_CONNECTED
        self._session = self.client.session.id if self.client.session else None
        yield from self._register()
        yield from self._subscribe()
        ok = yield from self._synced_rebalance()
        return ok

    def _main_done(self, result: Any) -> None:
        if result is not True and not self.exited:
            self.gave_up += 1
            self.kill()  # the exception reaches the application, which dies

    def _register(self) -> Step:
        ok = yield from self._create_expect_conflict(
            consumer_id_path(self.group, self.consumer_id), self.topic_count.encode())
        if not ok:
            raise _Fail("ids znode owned by someone else")

    def _subscribe(self) -> Step:
        for path in self.watches():
            children = yield from self._children(path, True)
            self.watched[path] = tuple(children)

    def _watcher(self) -> Step:
        while True:
            yield self.triggered
            yield from self._synced_rebalance()

    def _autocommit(self) -> Step:
        while True:
            yield float(self.config.autocommit_interval)
            yield from self._commit()

    def _on_watch(self, path: str, kind: WatchKind) -> None:
        self._post(self._child_event(path))

    def _child_event(self, path: str) -> Step:
        children = yield from self._children(path, True)  # zkclient re-arms, then calls back
        self.watched[path] = tuple(children)
        self.triggered.set()

    def _on_state(self, state: ConnState, session_id: int | None) -> None:
        if state is not ConnState.CONNECTED:
            return
        if session_id == self._session:
            self._post(self._restore_watches())
        elif self._session is not None:
            self._session = session_id
            self._post(self._new_session())
        self.threads.on_connected()

    def _restore_watches(self) -> Step:
        for path, before in list(self.watched.items()):
            children = yield from self._children(path, True)
            self.watched[path] = tuple(children)
            if tuple(children) != before:
                self.triggered.set()

    def _new_session(self) -> Step:
        self.registry = {}  # resetState: the fetchers keep running
        yield from self._register()
        yield from self._synced_rebalance()
        yield from self._restore_watches()
        self.triggered.set()  # fireAllEvents

    def _post(self, task: Step) -> None:
        """Queue a task on zkclient's single event thread."""
        self._events.append(task)
        if not self._event_busy:
            self._event_busy = True
            self.threads.spawn("zk-event", self._event_loop(), self._event_done)

    def _event_loop(self) -> Step:
        while self._events:
            task = self._events.pop(0)
            try:
                yield from task
            except (_Fail, ZkConsumerError) as exc:  # zkclient logs listener errors
                self.loop.log(self.consumer_id[-8:], f"event thread: {exc}")

    def _event_done(self, result: Any) -> None:
        self._event_busy = False
        if self._events:
            self._post(self._events.pop(0))

    # -- the rebalance -------------------------------------------------------------------------

    def _synced_rebalance(self) -> Step:
        yield self.lock
        ops_before = self.client.requests
        self.rebalances += 1
        try:
            done = yield from self._attempts()
        except Exception:  # the lock is a synchronized block: released on any exception
            self._rebalance_over(ops_before)
            raise
        self._rebalance_over(ops_before)
        return done

    def _rebalance_over(self, ops_before: int) -> None:
        # Not in a ``finally``: a dead process's generators are closed by the garbage
        # collector at unpredictable times, and nothing may happen then.
        self.rebalance_ops.append(self.client.requests - ops_before)
        self.lock.release()

    def _attempts(self) -> Step:
        who = self.consumer_id[-8:]
        for i in range(self.config.retries):
            self.loop.log(who, f"begin rebalancing try #{i}")
            cluster = yield from self._cluster()
            try:
                done = yield from self._attempt(cluster)
            except (_Fail, ZkConsumerError) as exc:
                self.loop.log(who, f"exception during rebalance: {exc}")
                done = False
            if done:
                self.loop.log(who, f"rebalanced: {sorted(self.registry)}")
                return True
            yield from self._close_fetchers()
            yield float(self.config.backoff)
        self.gave_up += 1
        self.loop.log(who, f"can't rebalance after {self.config.retries} retries")
        return False

    def _cluster(self) -> Step:
        ids = yield from self._children("/brokers/ids")
        brokers = []
        for b in ids:
            reply = yield from self._zk(GetData, f"/brokers/ids/{b}")
            if reply.error is None:
                brokers.append(int(b))
        return brokers

    def _close_fetchers(self) -> Step:
        self.feed.stop()
        self.feed.clear()
        self.fetching = {}
        yield from self._commit()

    def _commit(self) -> Step:
        """``commitOffsets``: write every registry partition's consumed offset."""
        for key, info in list(self.registry.items()):
            path = offset_path(self.group, key[0], key[1])
            data = str(info.consumed).encode()
            reply = yield from self._zk(SetData, path, data, -1)
            if reply.error is ZkError.NO_NODE:
                created = yield from self._zk(Create, path, data, False)
                if created.error is ZkError.NODE_EXISTS:
                    yield from self._zk(SetData, path, data, -1)

    def _attempt(self, cluster: list[int]) -> Step:
        group = self.group
        mine = parse_topic_count(consumer_id_path(group, self.consumer_id),
                                 (yield from self._read(consumer_id_path(group,
                                                                         self.consumer_id))))
        my_threads = mine.thread_ids_per_topic(self.consumer_id)
        consumers: dict[str, list[str]] = {}
        for cid in (yield from self._children(consumer_ids_path(group))):
            path = consumer_id_path(group, cid)
            count = parse_topic_count(path, (yield from self._read(path)))
            for topic, tids in count.thread_ids_per_topic(cid).items():
                consumers.setdefault(topic, []).extend(tids)
        partitions: dict[str, list[str]] = {}
        for topic in my_threads:
            parts: list[str] = []
            for b in (yield from self._children(topic_path(topic))):
                path = f"{topic_path(topic)}/{b}"
                n = parse_partition_count(path, (yield from self._read(path)))
                parts.extend(f"{b}-{p}" for p in range(n))
            partitions[topic] = sorted(parts, key=java_order)
        # closeFetchers + releasePartitionOwnership
        yield from self._close_fetchers()
        for key in list(self.registry):
            yield from self._zk(Delete, owner_path(group, key[0], key[1]), -1)
        self.registry = {}
        decided: dict[Key, str] = {}
        for topic, tids in my_threads.items():
            for part, tid in assign(partitions[topic], consumers.get(topic, ()), tids).items():
                decided[(topic, part)] = tid
        registry: dict[Key, _Info] = {}
        for key in decided:
            reply = yield from self._zk(GetData, offset_path(group, key[0], key[1]))
            registry[key] = _Info(0 if reply.error is not None else int(reply.data or b"0"))
        created: list[Key] = []
        conflict = False
        for key, tid in decided.items():
            ok = yield from self._create_expect_conflict(owner_path(group, key[0], key[1]),
                                                         tid.encode())
            if ok:
                created.append(key)
            else:
                conflict = True
        if conflict:
            self.loop.log(self.consumer_id[-8:], "conflict: rolling back the claim")
            for key in created:
                yield from self._zk(Delete, owner_path(group, key[0], key[1]), -1)
            return False
        self.registry = registry
        for key in registry:  # updateFetcher: every partition's broker must be registered
            if int(key[1].split("-", 1)[0]) not in cluster:
                raise _Fail(f"broker of {key} not registered")
        self.fetching = dict(registry)
        for key, info in registry.items():
            self.feed.add(key, info.consumed)
        self.feed.start()
        return True

    def _consumed(self, key: Key, offset: int, epoch: int) -> None:
        info = self.fetching.get(key)
        if info is not None and offset > info.consumed:
            info.consumed = offset

    def ops_per_rebalance(self) -> list[int]:
        return self.rebalance_ops

