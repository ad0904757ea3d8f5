"""What a large group costs ZooKeeper: cold start and one join, zkconsumer vs Scala 0.7.2.

The operator's question ("what does a group of 200 members cost ZooKeeper?") answered in
simulation, without faults and without traffic, for one member kind at a time:

* **cold start** -- every member starts within one second (a deploy); measured until the
  group has converged (invariant 4: the range assignment owned, all agree, nobody deaf);
* **one join** -- one more member joins the converged group; measured until converged again.

For each: simulated seconds to converge, ZooKeeper requests of all members together, the
number of per-member rebalances, the median requests per rebalance, and whether anyone
gave up.  The checker's other invariants run too; a violation is reported.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from zkconsumer.sim.run import Spec, World

__all__ = ["Phase", "measure"]

#: Stop waiting for convergence after this much simulated time.
LIMIT_S = 900.0


@dataclass(slots=True)
class Phase:
    kind: str
    phase: str
    members: int
    partitions: int
    converged_s: float | None
    requests: int
    rebalances: int
    ops_median: float
    gave_up: int
    violations: list[str]

    def row(self) -> str:
        took = "no" if self.converged_s is None else f"{self.converged_s:.1f} s"
        return (f"| {self.kind} | {self.phase} | {self.members} x {self.partitions} | {took} | "
                f"{self.requests:,} | {self.rebalances:,} | {self.ops_median:g} | "
                f"{self.gave_up} |")


HEADER = ("| members | phase | group | converged in (simulated) | ZooKeeper requests | "
          "rebalances | requests per rebalance (median) | gave up |\n"
          "|---|---|---|---|---|---|---|---|")


def measure(kind: str, members: int, partitions: int, seed: int = 0) -> list[Phase]:
    """Cold start then one join for a group of ``members`` of ``kind``
    (``"zkconsumer"`` or ``"scala"``) on ``partitions`` partitions."""
    spec = Spec(seed, members=members, scala_members=members if kind == "scala" else 0,
                partitions=partitions, faults=(), fault_count=0, start_window=1.0,
                streams=1, second_topic=False)
    world = World(spec)
    world.cluster.producing = False
    world.topics = ["t0"]
    phases = [_until_converged(world, kind, "cold start", members, partitions, 0.0)]
    start = world.loop.now
    world.add_member(kind)
    phases.append(_until_converged(world, kind, "one join", members + 1, partitions, start))
    return phases


def _until_converged(world: World, kind: str, phase: str, members: int, partitions: int,
                     start: float) -> Phase:
    loop, checker = world.loop, world.checker
    before = {m.consumer_id: (m.client.requests, m.rebalances, len(m.rebalance_ops))
              for m in checker.members.values()}
    converged: list[float] = []

    def check() -> None:
        if checker.violations:
            return
        if checker.converged(world.topics) is None:
            converged.append(loop.now)
            loop.halt()
        else:
            loop.after(0.5, check)

    loop.at(start + 0.5, check)
    loop.run_until(start + LIMIT_S)
    requests = rebalances = 0
    ops: list[int] = []
    for m in checker.members.values():
        r0, b0, o0 = before.get(m.consumer_id, (0, 0, 0))
        requests += m.client.requests - r0
        rebalances += m.rebalances - b0
        ops.extend(m.rebalance_ops[o0:])
    return Phase(kind, phase, members, partitions,
                 converged[0] - start if converged else None, requests, rebalances,
                 statistics.median(ops) if ops else 0.0,
                 sum(m.gave_up for m in checker.members.values()), list(checker.violations))
