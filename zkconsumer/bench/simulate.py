"""``zkconsumer bench simulate``: seeded fault schedules through the deterministic simulator.

Runs ``--seeds`` schedules (seeds ``--start`` ...) of `zkconsumer.sim`: the real member
machine and modelled Scala 0.7.2 members against an in-memory ZooKeeper, with faults, every
invariant checked as the run goes (docs/architecture.md, "Simulation").  A failing seed is
printed with its first violation and the command that replays it with a trace.  The last
line is always::

    simulated N schedules: V invariant violations, X rebalances, Y ZooKeeper ops per rebalance (median), T s

and the exit status is 1 if V > 0.  ``--capacity`` instead answers "what does a group of
this size cost ZooKeeper?": cold start and one join, zkconsumer members against the
modelled Scala algorithm (docs/performance.md has the 256 x 4,096 table).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

from zkconsumer.sim.batch import Summary, quiet, run_many
from zkconsumer.sim.capacity import HEADER, measure
from zkconsumer.sim.faults import KINDS
from zkconsumer.sim.invariants import ZOMBIE_BOUND
from zkconsumer.sim.run import Spec, run_schedule

HELP = "deterministic simulation of the group under seeded faults (invariants, capacity)"


def _faults(text: str) -> tuple[str, ...]:
    if text == "none":
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown fault kind(s) {unknown}; choose from "
                                         f"{', '.join(KINDS)} or none")
    return kinds


def _count(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}: {value}")
        return value
    return parse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n  zkconsumer bench simulate --seeds 10000\n"
        "  zkconsumer bench simulate --seeds 500 --members 8 --scala-members 3\n"
        "  zkconsumer bench simulate --start 52 --trace\n"
        "  zkconsumer bench simulate --faults kill,blip --seeds 2000\n"
        "  zkconsumer bench simulate --capacity --members 256 --partitions 4096\n\n"
        f"fault kinds: {', '.join(KINDS)}\n\n"
        "exit status: 0 no invariant violated, 1 a violation (or a capacity run that did not "
        "converge or gave up), 2 usage")
    parser.add_argument("--seeds", type=_count(1), default=1000, metavar="N",
                        help="schedules to run (default 1000)")
    parser.add_argument("--start", type=_count(0), default=0, metavar="S",
                        help="first seed (default 0)")
    parser.add_argument("--members", type=_count(1), metavar="M",
                        help="members at the start (default: drawn from 2-8 per seed; "
                             "--capacity: 256)")
    parser.add_argument("--scala-members", type=_count(0), metavar="K",
                        help="how many of them are Scala 0.7.2 members (default: none in two "
                             "thirds of the seeds, some in the rest)")
    parser.add_argument("--partitions", type=_count(1), metavar="P",
                        help="partitions of the main topic (default: drawn from 4-64; "
                             "--capacity: 4096)")
    parser.add_argument("--faults", type=_faults, default=KINDS, metavar="LIST",
                        help="comma-separated fault kinds, or none (default: all)")
    parser.add_argument("--strict-start", action="store_true",
                        help="a zkconsumer member whose start() fails gives up (default: the "
                             "application starts a new member after the backoff, as "
                             "`zkconsumer run` does)")
    parser.add_argument("--trace", action="store_true",
                        help="run only seed --start and print its whole event trace")
    parser.add_argument("--workers", type=_count(1), default=os.cpu_count() or 1, metavar="W",
                        help="worker processes (default: one per CPU)")
    parser.add_argument("--capacity", action="store_true",
                        help="cold start and one join of a large group, zkconsumer vs Scala")


def main(args: argparse.Namespace) -> int:
    if args.capacity:
        return _capacity(args.members or 256, args.partitions or 4096)
    specs = [Spec(seed, members=args.members, scala_members=args.scala_members,
                  partitions=args.partitions, faults=args.faults,
                  strict_start=args.strict_start)
             for seed in range(args.start, args.start + (1 if args.trace else args.seeds))]
    began = time.monotonic()
    if args.trace:
        outcome = run_schedule(specs[0], trace=True)
        for line in outcome.trace:
            print(line)
        summary = Summary()
        summary.add(outcome)
    else:
        summary = run_many(specs, workers=args.workers)
    summary.seconds = time.monotonic() - began
    for outcome in summary.failed[:20]:
        print(f"seed {outcome.seed}: {outcome.violations[0]}")
        print(f"  replay: zkconsumer bench simulate --start {outcome.seed} --trace"
              + _same(args))
    if summary.with_scala:
        print(f"# Scala 0.7.2 members: {summary.scala_gave_up} gave up after "
              f"rebalance.retries.max ({summary.waived} schedules waived for liveness and no loss), "
              f"{summary.scala_zombie} messages delivered by a Scala member that no longer "
              "owned the partition (it keeps fetching while disconnected), "
              f"{summary.scala_stale} offsets left behind by a Scala autocommit race, "
              f"{summary.scala_foreign_deletes} owner znodes of another member deleted by a "
              "retried Scala deletePath")
    print(f"# duplicates: {summary.duplicates} messages delivered again, at most "
          f"{summary.duplicate_age:.1f} s after their first delivery; zombie deliveries within "
          f"the {ZOMBIE_BOUND:g} s bound: {summary.zombie}; slowest convergence "
          f"{summary.converge_s:.1f} s after the last fault; zkconsumer start() failures "
          f"retried by the application: {summary.start_failures}")
    print(summary.line())
    return 1 if summary.failed else 0


def _same(args: argparse.Namespace) -> str:
    """The options that shape a schedule, to replay it exactly."""
    parts = []
    for flag, value in (("--members", args.members), ("--scala-members", args.scala_members),
                        ("--partitions", args.partitions)):
        if value is not None:
            parts.append(f" {flag} {value}")
    if args.faults != KINDS:
        parts.append(f" --faults {','.join(args.faults) or 'none'}")
    if args.strict_start:
        parts.append(" --strict-start")
    return "".join(parts)


def _capacity(members: int, partitions: int) -> int:
    print(HEADER)
    bad = False
    with quiet():
        for kind in ("zkconsumer", "scala"):
            for phase in measure(kind, members, partitions):
                print(phase.row())
                if phase.violations:
                    print(f"# {kind} {phase.phase}: {phase.violations[0]}")
                bad |= phase.converged_s is None or bool(phase.violations) or (
                    kind == "zkconsumer" and phase.gave_up > 0)
    return 1 if bad else 0
