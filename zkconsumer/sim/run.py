"""One simulated schedule from a seed: build the world, inject the faults, judge the end.

`run_schedule(Spec(seed))` is a pure function of the spec: the same spec gives the same
`Outcome`, event for event (run it with ``trace=True`` to get the story).  What a seed
decides, in order, from the one RNG: the group's size and mix (2-8 members, some Scala in
about a third of the schedules), the topic layout (4-64 partitions of ``t0`` on 1-3
brokers; ``t1`` exists from the start or appears later), each member's streams, start
times, the faults (5-20 of `zkconsumer.sim.faults.KINDS`, about one a second from t=3 s),
then every latency, delay and victim as the run goes.  Sizes and counts are drawn
skewed towards the small end of their ranges.

The end: the producer stops at the last fault; from then on the checker looks every 0.5 s
for convergence (invariant 4) and a drained group (invariant 3), and the run stops when
both hold, or fails at `LIVENESS_BOUND`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from zkconsumer.sim.faults import KINDS, Fault, apply_fault, make_faults
from zkconsumer.sim.invariants import LIVENESS_BOUND, Checker, Member
from zkconsumer.sim.loop import Loop
from zkconsumer.sim.machine import MachineMember
from zkconsumer.sim.scala import ScalaConfig, ScalaMember
from zkconsumer.sim.world import Cluster
from zkconsumer.sim.zk import ZooKeeper

__all__ = ["MEMBER_KINDS", "Counts", "Outcome", "Spec", "World", "run_schedule"]

#: Builders of members by kind: ``(world, consumer_id, topics) -> Member``.
MEMBER_KINDS: dict[str, Callable[[World, str, dict[str, int]], Member]] = {}


@dataclass(frozen=True, slots=True)
class Spec:
    """What to simulate; ``None`` fields are drawn from the seed."""

    seed: int
    members: int | None = None
    scala_members: int | None = None
    partitions: int | None = None
    faults: tuple[str, ...] = KINDS
    fault_count: int | None = None
    #: explicit faults instead of drawn ones (hypothesis shrinks these)
    plan: tuple[Fault, ...] | None = None
    #: a zkconsumer member whose start() fails counts as giving up (default: the
    #: application starts a new member after the backoff, as `zkconsumer run` does)
    strict_start: bool = False
    #: members start within this many seconds; streams per member on t0 (None: 1 or 2);
    #: whether t1 exists from the start (None: drawn)
    start_window: float = 2.0
    streams: int | None = None
    second_topic: bool | None = None


@dataclass(slots=True)
class Counts:
    """What schedules count: one schedule's (`Outcome`) or many summed (`batch.Summary`).
    ``duplicate_age`` and ``converge_s`` are maxima; everything else adds up."""

    rebalances: int = 0
    ops: list[int] = field(default_factory=list)  # ZooKeeper requests, one per rebalance
    duplicates: int = 0
    duplicate_age: float = 0.0
    scala_stale: int = 0
    zombie: int = 0
    scala_zombie: int = 0
    scala_gave_up: int = 0
    start_failures: int = 0  # zkconsumer start() raised (the application started anew)
    scala_foreign_deletes: int = 0  # owner znodes of another session a Scala member deleted
    waived: int = 0  # schedules where a Scala member gave up (liveness/no loss waived)
    converge_s: float = 0.0  # after the last fault (slowest, when summed)

    def add_counts(self, other: Counts) -> None:
        self.rebalances += other.rebalances
        self.ops.extend(other.ops)
        self.duplicates += other.duplicates
        self.duplicate_age = max(self.duplicate_age, other.duplicate_age)
        self.scala_stale += other.scala_stale
        self.zombie += other.zombie
        self.scala_zombie += other.scala_zombie
        self.scala_gave_up += other.scala_gave_up
        self.start_failures += other.start_failures
        self.scala_foreign_deletes += other.scala_foreign_deletes
        self.waived += other.waived
        self.converge_s = max(self.converge_s, other.converge_s)


@dataclass(slots=True)
class Outcome(Counts):
    seed: int = 0
    members: int = 0
    scala_members: int = 0
    partitions: int = 0
    faults: int = 0
    violations: list[str] = field(default_factory=list)
    sim_s: float = 0.0
    steps: int = 0
    trace: list[str] = field(default_factory=list)


def _scala_member(world: World, consumer_id: str, topics: dict[str, int]) -> Member:
    config = ScalaConfig()
    config.autocommit_interval = world.autocommit
    return ScalaMember(world.loop, world.zk, world.cluster, world.checker, world.group,
                       consumer_id, topics, config)


def _machine_member(world: World, consumer_id: str, topics: dict[str, int]) -> Member:
    member = MachineMember(world.loop, world.zk, world.cluster, world.checker, world.group,
                           consumer_id, topics, autocommit_s=world.autocommit)
    if not world.strict_start:
        member.on_start_failed = lambda: world.rejoin(member)
    return member


MEMBER_KINDS["scala"] = _scala_member
MEMBER_KINDS["zkconsumer"] = _machine_member


class World:
    """The simulated ZooKeeper, brokers, members and checker of one schedule."""

    def __init__(self, spec: Spec, *, trace: bool = False) -> None:
        self.loop = loop = Loop(spec.seed, trace=trace)
        rng = loop.rng
        self.zk = ZooKeeper(loop)
        self.cluster = Cluster(loop, self.zk)
        self.group = "g"
        self.checker = Checker(loop, self.zk, self.cluster, self.group)
        self.topics = ["t0", "t1"]
        self.leaving: dict[str, None] = {}
        self.strict_start = spec.strict_start
        self.autocommit = rng.choice((1.0, 2.0, 5.0))
        # Sizes are drawn skewed towards the small end of their ranges (r cubed): most
        # orderings show up in small groups, and small groups are fast to simulate (a
        # schedule costs about members squared times faults).
        n_members = spec.members if spec.members is not None else _skewed(rng.random(), 2, 8)
        if spec.scala_members is not None:
            n_scala = min(spec.scala_members, n_members)
        else:
            n_scala = rng.randint(1, n_members) if rng.random() < 0.33 else 0
        self.scala_share = n_scala / n_members
        partitions = (spec.partitions if spec.partitions is not None
                      else _skewed(rng.random(), 4, 64))
        brokers = rng.randint(1, min(3, partitions))
        for b in range(brokers):
            self.cluster.add_topic("t0", b, partitions // brokers + (b < partitions % brokers))
        second = rng.random() < 0.5
        if spec.second_topic if spec.second_topic is not None else second:
            self.cluster.add_topic("t1", 0, rng.randint(1, 4))
        self.streams = spec.streams
        self._next_member = 0
        self.outcome = Outcome(seed=spec.seed, members=n_members, scala_members=n_scala,
                               partitions=partitions)
        kinds = ["scala"] * n_scala + ["zkconsumer"] * (n_members - n_scala)
        for kind in kinds:
            self.add_member(kind, rng.uniform(0.0, spec.start_window))

    def add_member(self, kind: str | None = None, delay: float = 0.0) -> Member:
        rng = self.loop.rng
        if kind is None:
            kind = "scala" if rng.random() < self.scala_share else "zkconsumer"
        self._next_member += 1
        n = self._next_member
        consumer_id = f"{self.group}_host{n:02d}-{1000 + n}-{rng.getrandbits(32):08x}"
        streams = {"t0": self.streams or rng.choice((1, 1, 2)), "t1": 1}
        member = MEMBER_KINDS[kind](self, consumer_id, streams)
        self.checker.members[consumer_id] = member
        self.loop.after(delay, member.start)
        self.loop.log("world", f"{kind} member {consumer_id} joins")
        return member

    def rejoin(self, failed: Member) -> None:
        """`zkconsumer run` after start() raised: a new member, ``rebalance.backoff.ms``
        later (the failed one is closing)."""
        self.leaving[failed.consumer_id] = None
        self.loop.log("world", f"{failed.consumer_id} failed to start; a new member in 2 s")
        self.add_member("zkconsumer", 2.0)

    def add_partitions(self) -> None:
        rng = self.loop.rng
        broker = max(self.cluster.brokers) + 1
        self.cluster.add_topic(rng.choice(self.topics), broker, rng.randint(1, 8))


class _TraceLog(logging.Handler):
    """Copies the member machine's log lines (its state changes, conflicts) into the trace."""

    def __init__(self, loop: Loop) -> None:
        super().__init__(logging.DEBUG)
        self.loop = loop

    def emit(self, record: logging.LogRecord) -> None:
        self.loop.log("log", record.getMessage())


@contextmanager
def _machine_log(loop: Loop) -> Iterator[None]:
    if not loop.tracing:
        yield
        return
    logger = logging.getLogger("zkconsumer.consumer")
    handler, level = _TraceLog(loop), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def run_schedule(spec: Spec, *, trace: bool = False) -> Outcome:
    """Simulate one schedule (see the module docstring)."""
    world = World(spec, trace=trace)
    with _machine_log(world.loop):
        return _run(world, spec)


def _run(world: World, spec: Spec) -> Outcome:
    loop, checker, outcome = world.loop, world.checker, world.outcome
    rng = loop.rng
    count = spec.fault_count if spec.fault_count is not None else _skewed(rng.random(), 5, 20)
    faults = make_faults(rng.random, spec.faults, count, 3.0, count * rng.uniform(0.5, 1.5))
    if spec.plan is not None:
        faults = sorted(spec.plan, key=lambda f: (f.at, f.kind))
    outcome.faults = len(faults)
    for fault in faults:
        loop.at(fault.at, apply_fault, world, fault)
    last = faults[-1].at if faults else 3.0
    loop.at(0.0, world.cluster.produce_tick)
    loop.at(last, _stop_producing, world)
    deadline = last + LIVENESS_BOUND
    state: dict[str, str | None] = {"converged": "not checked", "drained": "not checked"}
    converged_once: list[bool] = []

    def check() -> None:
        reason = checker.converged(world.topics)
        if reason is None and not converged_once:
            converged_once.append(True)
            outcome.converge_s = loop.now - last
        state["converged"] = reason
        state["drained"] = checker.drained() if reason is None else "not converged"
        if reason is None and state["drained"] is None:
            loop.halt()
        else:
            loop.after(0.5, check)

    loop.at(last + 0.5, check)
    loop.run_until(deadline)
    members = list(checker.members.values())
    outcome.scala_gave_up = sum(m.gave_up for m in members if m.kind == "scala")
    outcome.start_failures = sum(getattr(m, "start_failures", 0) for m in members)
    # A Scala member that gave up either stayed registered owning nothing or exited, or one
    # deleted another member's owner znode: the group cannot be expected to converge or
    # drain after that (REFERENCE §2.2).
    outcome.scala_foreign_deletes = checker.scala_foreign_deletes
    outcome.waived = int(outcome.scala_gave_up > 0 or outcome.scala_foreign_deletes > 0)
    if not checker.violations:
        for m in members:
            if m.kind != "scala" and m.gave_up:
                checker.fail("nobody gives up", f"{m.consumer_id} gave up")
        if state["converged"] is not None and not outcome.waived:
            checker.fail("liveness", f"not converged {LIVENESS_BOUND:.0f} s after the last "
                         f"fault: {state['converged']}")
        elif state["drained"] is not None and not outcome.waived:
            checker.fail("no loss", f"not drained {LIVENESS_BOUND:.0f} s after the last "
                         f"fault: {state['drained']}")
    outcome.violations = checker.violations
    outcome.rebalances = sum(m.rebalances for m in members)
    outcome.ops = [n for m in members for n in m.rebalance_ops]
    outcome.duplicates = checker.duplicates
    outcome.duplicate_age = checker.duplicate_age
    outcome.scala_stale = len(checker.scala_stale)
    outcome.zombie = checker.zombie
    outcome.scala_zombie = checker.scala_zombie
    outcome.sim_s = loop.now
    outcome.steps = loop.steps
    outcome.trace = loop.trace
    return outcome


def _skewed(r: float, low: int, high: int) -> int:
    """An int in ``[low, high]``, small values likelier (``r`` uniform in [0, 1)); the
    largest still comes up in about 5 % of the draws for a range of 7."""
    return low + int((high - low + 1) * r * r * r)


def _stop_producing(world: World) -> None:
    world.cluster.producing = False
    world.loop.log("world", "producer stops (last fault)")
