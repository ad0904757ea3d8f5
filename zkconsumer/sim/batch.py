"""Many schedules at once: `run_many` over worker processes, and the one-line summary.

Each schedule is independent and deterministic, so they are spread over processes (fork)
in chunks of consecutive seeds and the results gathered in seed order: the summary of
seeds S..S+N is the same whatever the number of workers.  Workers drop traces; a failing
seed is replayed with ``trace=True`` by whoever wants its story (`run_schedule` again).

While schedules run, the member machine's logging is silenced (it would print thousands
of expected warnings -- conflicts, expiries -- and cost more than the simulation).
"""

from __future__ import annotations

import logging
import multiprocessing
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from zkconsumer.sim.run import Counts, Outcome, Spec, run_schedule

__all__ = ["Summary", "quiet", "run_many"]


@dataclass(slots=True)
class Summary(Counts):
    """What N schedules found (see `line` for the one-line form)."""

    schedules: int = 0
    failed: list[Outcome] = field(default_factory=list)
    with_scala: int = 0
    seconds: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.schedules += 1
        if outcome.violations:
            self.failed.append(outcome)
        self.with_scala += outcome.scala_members > 0
        self.add_counts(outcome)

    @property
    def ops_median(self) -> float:
        return statistics.median(self.ops) if self.ops else 0.0

    def line(self) -> str:
        return (f"simulated {self.schedules} schedules: {len(self.failed)} invariant "
                f"violations, {self.rebalances} rebalances, {self.ops_median:g} ZooKeeper ops "
                f"per rebalance (median), {self.seconds:.1f} s")


@contextmanager
def quiet() -> Iterator[None]:
    """Silence logging while simulating (restored afterwards): the machine logs expected
    failures (conflicts, expiries, failed rebalances) at every level up to ERROR."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def _run_chunk(specs: Sequence[Spec]) -> list[Outcome]:
    with quiet():
        return [_slim(run_schedule(spec)) for spec in specs]


def _slim(outcome: Outcome) -> Outcome:
    return replace(outcome, trace=[])


def run_many(specs: Sequence[Spec], *, workers: int = 1, chunk: int = 50) -> Summary:
    """Run every spec; ``workers`` > 1 forks that many processes."""
    summary = Summary()
    chunks = [specs[i:i + chunk] for i in range(0, len(specs), chunk)]
    if workers <= 1 or len(chunks) <= 1:
        for part in chunks:
            for outcome in _run_chunk(part):
                summary.add(outcome)
        return summary
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(workers) as pool:
        for outcomes in pool.imap(_run_chunk, chunks):
            for outcome in outcomes:
                summary.add(outcome)
    return summary
