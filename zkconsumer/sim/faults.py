"""Seeded fault schedules and how each fault is done to the simulated world.

A schedule is a sorted list of `Fault` (time, kind).  Victims (which member, which broker)
are chosen when the fault happens, from the live ones, with the loop's RNG -- so the same
seed always hits the same victims.  A fault that would leave the group without any live
member becomes a join instead.

Kinds (`KINDS`):

``kill``      kill -9: nothing more runs; the session lives until it times out.
``term``      SIGTERM: the member closes within a 5 s deadline (then it is killed).
``pause``     the process freezes for 0.2-15 s (often past the 6 s session timeout) and
              wakes with everything that fell due meanwhile.
``blip``      the member's ZooKeeper connection drops for 0.05-10 s; the session survives
              only if it reconnects within its timeout.
``zk_slow``   every ZooKeeper answer takes 10-50 times longer for 1-5 s.
``zk_restart`` ZooKeeper is down for 0.5-4 s: every connection drops; sessions survive if
              they reconnect within their timeout after the restart.
``join``      1-3 members join at once (a burst).
``leave``     1-3 members leave at once (SIGTERM).
``topic``     a broker appears with partitions of a subscribed topic (possibly the first
              partitions of a topic nobody had yet).
``garbage``   a garbage znode appears where members read (``owners/<t>/junk``, a
              ``/consumers/G/junk`` child, and -- in groups without Scala members, whose
              every rebalance it would break -- an unreadable ``ids`` child).
``broker_fail`` a broker fails every fetch for 1-10 s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from zkconsumer.consumer.member_commands import Create
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.invariants import Checker, Member
from zkconsumer.sim.loop import Loop, Process
from zkconsumer.sim.world import Cluster
from zkconsumer.sim.zk import ZooKeeper
from zkconsumer.zk.paths import consumer_ids_path, group_path, owners_topic_path

__all__ = ["KINDS", "Fault", "World", "apply_fault", "make_faults"]

KINDS = ("kill", "term", "pause", "blip", "zk_slow", "zk_restart", "join", "leave", "topic",
         "garbage", "broker_fail")


class World(Protocol):
    """What faults are done to (`zkconsumer.sim.run.World`)."""

    loop: Loop
    zk: ZooKeeper
    cluster: Cluster
    checker: Checker
    group: str
    topics: list[str]
    leaving: dict[str, None]
    scala_share: float

    def add_member(self, kind: str | None = None, delay: float = 0.0) -> Member: ...

    def add_partitions(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Fault:
    at: float
    kind: str


def make_faults(rng_random: Callable[[], float], kinds: Sequence[str], count: int,
                start: float, window: float) -> list[Fault]:
    """``count`` faults of the given kinds at seeded times in ``[start, start+window]``."""
    faults = []
    for _ in range(count):
        at = start + rng_random() * window
        kind = kinds[int(rng_random() * len(kinds))]
        faults.append(Fault(round(at, 6), kind))
    return sorted(faults, key=lambda f: (f.at, f.kind))


def apply_fault(world: World, fault: Fault) -> None:
    """Do ``fault`` to ``world`` now."""
    loop = world.loop
    rng = loop.rng
    live = [m for m in world.checker.live() if m.consumer_id not in world.leaving]
    kind = fault.kind
    if kind in ("kill", "term", "pause", "blip", "leave") and len(live) <= 1:
        kind = "join"
    loop.log("FAULT", kind)
    if kind == "kill":
        victim = live[rng.randrange(len(live))]
        loop.log("FAULT", f"kill -9 {victim.consumer_id}")
        victim.kill()
    elif kind == "term":
        victim = live[rng.randrange(len(live))]
        _terminate(world, victim)
    elif kind == "leave":
        for _ in range(min(rng.randint(1, 3), len(live) - 1)):
            _terminate(world, live.pop(rng.randrange(len(live))))
    elif kind == "pause":
        victim = live[rng.randrange(len(live))]
        duration = rng.choice((rng.uniform(0.2, 3.0), rng.uniform(6.5, 15.0)))
        loop.log("FAULT", f"pause {victim.consumer_id} {duration:.2f}s")
        _pause(world, victim.proc, victim.client, duration)
    elif kind == "blip":
        victim = live[rng.randrange(len(live))]
        duration = rng.choice((rng.uniform(0.05, 2.0), rng.uniform(6.5, 10.0)))
        loop.log("FAULT", f"blip {victim.consumer_id} {duration:.2f}s")
        client = victim.client
        client.net_down = True
        client.drop()
        loop.after(duration, _heal, client)
    elif kind == "zk_slow":
        world.zk.slow = rng.uniform(10, 50)
        loop.after(rng.uniform(1, 5), _unslow, world)
    elif kind == "zk_restart":
        world.zk.stop()
        loop.after(rng.uniform(0.5, 4), world.zk.start)
    elif kind == "join":
        for _ in range(rng.randint(1, 3)):
            world.add_member()
    elif kind == "topic":
        world.add_partitions()
    elif kind == "garbage":
        paths = [f"{owners_topic_path(world.group, world.topics[0])}/junk",
                 f"{group_path(world.group)}/junk"]
        if not world.scala_share:
            paths.append(f"{consumer_ids_path(world.group)}/junk-member")
        path = paths[rng.randrange(len(paths))]
        world.zk.execute(world.cluster.session.id, Create(0, path, b"\x00garbage"))
    elif kind == "broker_fail":
        brokers = sorted(world.cluster.brokers)
        world.cluster.fail_broker(brokers[rng.randrange(len(brokers))], rng.uniform(1, 10))


def _terminate(world: World, victim: Member) -> None:
    world.loop.log("FAULT", f"SIGTERM {victim.consumer_id}")
    world.leaving[victim.consumer_id] = None
    victim.terminate(world.loop.now + 5.0)


def _heal(client: ZkClient) -> None:
    client.net_down = False


def _unslow(world: World) -> None:
    world.zk.slow = 1.0


def _pause(world: World, proc: Process, client: ZkClient, duration: float) -> None:
    loop = world.loop
    loop.pause(proc)
    if client.session is not None and client.state.value == "CONNECTED":
        world.zk.silent(client.session)

    def wake() -> None:
        if proc.dead:
            return
        loop.wake(proc)
        session = client.session
        if session is None or not session.alive or client.state.value != "CONNECTED":
            return
        if duration > client.timeout * 2 / 3:
            client.drop()  # kazoo's read timeout fires: reconnect, same session
            client.net_down = False
        else:
            world.zk.touch(session)

    loop.after(duration, wake)
