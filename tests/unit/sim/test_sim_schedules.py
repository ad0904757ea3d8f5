"""Whole simulated schedules: determinism, and the checker catching planted defects.

The volume gate (10,000 schedules) is `test_sim_volume`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from zkconsumer.consumer.member_commands import Create, SetData
from zkconsumer.sim.batch import quiet, run_many
from zkconsumer.sim.faults import Fault
from zkconsumer.sim.invariants import Checker
from zkconsumer.sim.loop import Loop
from zkconsumer.sim.run import Outcome, Spec, World, run_schedule
from zkconsumer.sim.scala import ScalaMember
from zkconsumer.sim.world import Cluster
from zkconsumer.sim.zk import ZooKeeper


def _digest(seed: int) -> str:
    with quiet():
        outcome = run_schedule(Spec(seed), trace=True)
    text = "\n".join(outcome.trace) + repr((outcome.violations, outcome.ops, outcome.steps))
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_seed_replays_exactly() -> None:
    for seed in (1, 2, 3):
        assert _digest(seed) == _digest(seed)


def test_a_seed_replays_exactly_in_another_process_with_another_hash_seed() -> None:
    # set/dict iteration of str depends on PYTHONHASHSEED: nothing may depend on it
    code = ("from zkconsumer.sim.run import Spec, run_schedule;"
            "import hashlib, logging; logging.disable(logging.CRITICAL);"
            "o = run_schedule(Spec(7), trace=True);"
            "t = chr(10).join(o.trace) + repr((o.violations, o.ops, o.steps));"
            "print(hashlib.sha256(t.encode()).hexdigest())")
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": str(h)}, timeout=120).stdout.strip()
        for h in (1, 2)
    }
    assert digests == {_digest(7)}


def _quiet_world(seed: int) -> World:
    """A started world of two zkconsumer members that has converged."""
    world = World(Spec(seed, members=2, scala_members=0, partitions=4, second_topic=False))
    world.topics = ["t0"]
    world.loop.run_until(5.0)
    assert world.checker.converged(world.topics) is None
    return world


def test_the_checker_catches_a_commit_past_the_acknowledged_offset() -> None:
    world = _quiet_world(11)
    key = next(iter(world.cluster.ends))
    acked = world.checker.acked_to.get(key, 0)
    world.zk.execute(world.cluster.session.id,
                     Create(0, f"/consumers/g/offsets/{key[0]}/{key[1]}", b"0"))
    world.zk.execute(world.cluster.session.id,
                     SetData(0, f"/consumers/g/offsets/{key[0]}/{key[1]}",
                             str(acked + 5).encode()))
    assert any("commit safety" in v for v in world.checker.violations)


def test_the_checker_catches_delivery_without_ownership() -> None:
    world = _quiet_world(12)
    member = next(iter(world.checker.members.values()))
    stolen = next(k for k in world.cluster.ends if k not in member.feed.positions)
    world.cluster.ends[stolen] += 10
    member.feed.add(stolen, 0)  # delivers a partition it does not own
    world.loop.run_until(world.loop.now + 3.0)
    assert any("exclusive delivery" in v for v in world.checker.violations)


def test_the_checker_sees_a_deaf_member_and_a_wrong_owner() -> None:
    world = _quiet_world(13)
    member = next(iter(world.checker.members.values()))
    assert member.client.session is not None
    world.zk.drop_watches(member.client.session.id)
    assert "deaf" in (world.checker.converged(world.topics) or "")
    world2 = _quiet_world(14)
    owner = next(p for p in world2.zk.nodes if p.startswith("/consumers/g/owners/t0/"))
    world2.zk.nodes[owner].data = b"someone-else-0"
    assert "assignment says" in (world2.checker.converged(world2.topics) or "")


def test_the_checker_sees_undrained_messages() -> None:
    world = _quiet_world(15)
    key = next(iter(world.cluster.ends))
    world.cluster.ends[key] += 1_000_000
    assert "acknowledged" in (world.checker.drained() or "")


def test_scala_only_groups_keep_the_invariants() -> None:
    # the simulator's self-test: the modelled Scala algorithm under every fault
    summary = run_many([Spec(seed, scala_members=8) for seed in range(300)], workers=2)
    assert not summary.failed, _report(summary.failed)
    assert summary.rebalances > 0 and summary.ops


def _report(failed: list[Outcome]) -> str:
    lines = [f"{len(failed)} schedules violated an invariant; replay one with "
             "`zkconsumer bench simulate --start SEED --trace`:"]
    lines += [f"seed {o.seed}: {o.violations[0]}" for o in failed[:15]]
    return "\n".join(lines)


def test_scala_members_reach_the_reference_vector_of_zkloadbalancetest() -> None:
    # [K072] test/unit/kafka/zk/ZKLoadBalanceTest.scala, played by two modelled Scala members
    loop = Loop(5)
    zk = ZooKeeper(loop)
    cluster = Cluster(loop, zk)
    for broker, n in ((200, 2), (300, 2), (400, 1)):
        cluster.add_topic("topic1", broker, n)
    checker = Checker(loop, zk, cluster, "group1")
    for cid in ("group1_consumer1", "group1_consumer2"):
        member = ScalaMember(loop, zk, cluster, checker, "group1", cid, {"topic1": 1})
        checker.members[cid] = member
        member.start()
    loop.run_until(20.0)
    owners = {p: zk.nodes[f"/consumers/group1/owners/topic1/{p}"].data
              for p in ("200-0", "200-1", "300-0", "300-1", "400-0")}
    assert owners == {"200-0": b"group1_consumer1-0", "200-1": b"group1_consumer1-0",
                      "300-0": b"group1_consumer1-0", "300-1": b"group1_consumer2-0",
                      "400-0": b"group1_consumer2-0"}
    assert checker.converged(["topic1"]) is None and not checker.violations


def test_an_explicit_fault_plan_is_played_as_given() -> None:
    # what hypothesis (or a person) uses to shrink or hand-write a schedule
    plan = (Fault(4.0, "zk_restart"), Fault(9.0, "blip"))
    with quiet():
        outcome = run_schedule(Spec(21, members=3, scala_members=3, partitions=6, plan=plan),
                               trace=True)
    assert outcome.faults == 2 and not outcome.violations
    faults = [line for line in outcome.trace if "FAULT" in line]
    assert faults[0].split()[0] == "4.0000" and "zk_restart" in faults[0]
    assert any(line.split()[0] == "9.0000" and "blip" in line for line in faults)
