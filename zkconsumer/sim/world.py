"""Brokers as growing log ends, a producer, and each member's fetch-and-deliver pipeline.

Offsets are message indexes: partition ``(topic, "B-P")`` holds messages ``0 .. end-1`` and
a committed offset ``c`` means "resume at message ``c``".  (Real 0.7 offsets are byte
positions; the group protocol only needs them ordered, which indexes are.)

* `Cluster` registers brokers (``/brokers/ids/<b>`` and ``/brokers/topics/<t>/<b>``, on a
  broker session that never expires), grows log ends (`produce_tick`), and may make one
  broker fail every fetch for a while (`fail_broker`).
* `Feed` is one member's fetchers plus its application: partitions are added with a start
  offset, fetched only while the feed is started, not paused, and the broker answers;
  each fetch hands a batch to the application (`Observer.delivered`, where the invariants
  look), and the application acknowledges it after a seeded delay (``on_ack``), in order
  per partition -- or at once for a Scala member, whose "acknowledged" is "handed out by the iterator".

Fetching polls: a member's feed wakes every 20-120 ms while it has data to fetch and
every ``FETCH_BACKOFF`` when it found nothing (Scala's ``fetcher.backoff.ms``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from zkconsumer.consumer.member_commands import Create
from zkconsumer.consumer.member_events import Key
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.loop import Loop, Process
from zkconsumer.sim.zk import ZooKeeper
from zkconsumer.zk.paths import BrokerInfo, broker_id_path, partition_name, topic_broker_path

__all__ = ["Cluster", "Feed", "MemberProcess", "Observer"]

FETCH_BACKOFF = 1.0
MAX_BATCH = 50


class Observer(Protocol):
    """What the invariant checker needs to see of deliveries and acknowledgements."""

    def delivered(self, member: str, key: Key, start: int, end: int) -> None: ...

    def acked(self, key: Key, start: int, end: int) -> None: ...


class Cluster:
    """The brokers: registrations in ZooKeeper and the log end of every partition."""

    def __init__(self, loop: Loop, zk: ZooKeeper) -> None:
        self.loop = loop
        self.zk = zk
        self.session = zk.open_session(float("inf"), None)
        self.brokers: dict[int, BrokerInfo] = {}
        self.ends: dict[Key, int] = {}
        self.failing: dict[int, float] = {}
        self.producing = True

    def add_broker(self, broker_id: int) -> None:
        if broker_id in self.brokers:
            return
        info = BrokerInfo(broker_id, f"127.0.0.1-{1000 + broker_id}", "127.0.0.1",
                          9000 + broker_id)
        self.brokers[broker_id] = info
        self.zk.execute(self.session.id, Create(0, broker_id_path(broker_id), info.encode(),
                                                ephemeral=True))

    def add_topic(self, topic: str, broker_id: int, partitions: int) -> None:
        """Broker ``broker_id`` registers ``partitions`` partitions of ``topic``."""
        self.add_broker(broker_id)
        self.zk.execute(self.session.id, Create(0, topic_broker_path(topic, broker_id),
                                                str(partitions).encode(), ephemeral=True))
        for p in range(partitions):
            self.ends.setdefault((topic, partition_name(broker_id, p)), 0)

    def fail_broker(self, broker_id: int, duration: float) -> None:
        self.failing[broker_id] = self.loop.now + duration

    def answers(self, key: Key) -> bool:
        """Whether the broker holding ``key`` answers fetches now."""
        until = self.failing.get(int(key[1].split("-", 1)[0]))
        return until is None or until <= self.loop.now

    def produce_tick(self) -> None:
        """Append a few messages to a few partitions; reschedules itself while producing."""
        if not self.producing or not self.ends:
            return
        rng = self.loop.rng
        keys = list(self.ends)
        for _ in range(rng.randint(1, 3)):
            key = keys[rng.randrange(len(keys))]
            self.ends[key] += rng.randint(1, 20)
        self.loop.after(rng.uniform(0.1, 0.4), self.produce_tick)


class Feed:
    """One member's fetchers and application (see the module docstring).

    Invariant: a partition is delivered only while it is in ``positions``, not revoked,
    the feed is started and not paused; its position only moves forward.
    """

    def __init__(self, loop: Loop, cluster: Cluster, proc: Process, name: str,
                 observer: Observer, on_ack: Callable[[Key, int, int], None], *,
                 ack_delay: tuple[float, float] | None) -> None:
        self.loop = loop
        self.cluster = cluster
        self.proc = proc
        self.name = name
        self.observer = observer
        self.on_ack = on_ack
        self.ack_delay = ack_delay
        self.positions: dict[Key, int] = {}
        self.revoked: dict[Key, None] = {}
        self.started = False
        self.paused = False
        self._ticking = False
        self._acks_at: dict[Key, float] = {}
        self._epoch = 0
        self.epochs: dict[Key, int] = {}

    def add(self, key: Key, offset: int) -> int:
        """Start serving ``key`` from ``offset``; returns the claim's epoch (acks carry it,
        so an ack of a message handed out under an earlier claim can be told apart)."""
        self.positions[key] = offset
        self.revoked.pop(key, None)
        self._epoch += 1
        self.epochs[key] = self._epoch
        return self._epoch

    def revoke(self, key: Key) -> None:
        if key in self.positions:
            self.revoked[key] = None

    def remove(self, key: Key) -> None:
        self.positions.pop(key, None)
        self.revoked.pop(key, None)

    def clear(self) -> None:
        self.positions.clear()
        self.revoked.clear()

    def active(self) -> list[Key]:
        """The partitions this member delivers now (its belief of what it owns)."""
        if not self.started or self.paused:
            return []
        return [k for k in self.positions if k not in self.revoked]

    def start(self) -> None:
        self.started = True
        self._kick()

    def stop(self) -> None:
        self.started = False

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False
        self._kick()

    def _kick(self) -> None:
        if not self._ticking:
            self._ticking = True
            self.loop.after(self.loop.rng.uniform(0.02, 0.12), self._tick, proc=self.proc)

    def _tick(self) -> None:
        self._ticking = False
        if not self.started:
            return
        found = False
        if not self.paused:
            ends = self.cluster.ends
            rng = self.loop.rng
            for key in list(self.positions):
                if key in self.revoked or not self.cluster.answers(key):
                    continue
                pos = self.positions[key]
                end = min(ends.get(key, 0), pos + MAX_BATCH)
                if end <= pos:
                    continue
                found = True
                self.positions[key] = end
                self.observer.delivered(self.name, key, pos, end)
                epoch = self.epochs[key]
                if self.ack_delay is None:
                    self.observer.acked(key, pos, end)
                    self.on_ack(key, end, epoch)
                else:  # the application processes a partition in order
                    when = max(self.loop.now + rng.uniform(*self.ack_delay),
                               self._acks_at.get(key, 0.0))
                    self._acks_at[key] = when
                    self.loop.at(when, self._ack, key, pos, end, epoch, proc=self.proc)
        self._ticking = True
        self.loop.after(self.loop.rng.uniform(0.02, 0.12) if found else FETCH_BACKOFF,
                        self._tick, proc=self.proc)

    def _ack(self, key: Key, start: int, end: int, epoch: int) -> None:
        self.observer.acked(key, start, end)
        self.on_ack(key, end, epoch)


class MemberProcess:
    """What every simulated member (Scala model or machine executor) shares: its process,
    its ZooKeeper client and feed (set by the subclass), kill -9, the end of a SIGTERM's
    grace period, a clean exit, and the counters the harness reads."""

    kind = ""
    client: ZkClient
    feed: Feed

    def __init__(self, loop: Loop, consumer_id: str) -> None:
        self.loop = loop
        self.consumer_id = consumer_id
        self.proc = Process(consumer_id)
        self.gave_up = 0
        self.rebalances = 0
        self.rebalance_ops: list[int] = []
        self.exited = False

    @property
    def alive(self) -> bool:
        return not self.exited

    def kill(self) -> None:
        """kill -9: nothing more runs; the session lives until it times out."""
        self.exited = True
        self.loop.kill(self.proc)
        self.client.vanish()
        self.feed.stop()

    def exit(self) -> None:
        """A clean exit: fetchers stopped, the session closed (its ephemerals vanish now)."""
        self.exited = True
        self.feed.stop()
        self.client.close()
        self.loop.kill(self.proc)

    def kill_at(self, deadline: float) -> None:
        """The end of a SIGTERM's grace period: still running then means kill -9."""
        self.loop.at(deadline, self._deadline, proc=self.proc)

    def _deadline(self) -> None:
        if not self.exited:
            self.kill()
