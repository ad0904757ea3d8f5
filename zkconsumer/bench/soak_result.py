"""What a soak run found: faults with their recovery times, tallies, bounds, failures.

Pure data and arithmetic (no processes), so the judge's rules are testable alone:

* `peak_rate` -- the highest consumption rate over any span of one commit interval, from
  ``(time, bytes written)`` samples;
* `duplicate_bound` -- per fault that hit a group: two commit intervals at the group's peak
  rate (acknowledged but not committed, plus the commit in flight), plus ``--max-in-flight``
  for each member the fault hit (what a sink held unacknowledged), plus one producer batch
  per partition (a compressed set replays whole, its messages share the wrapper's offset);
* `fault_window` -- which faults preceded a gap, from the produce times of its ids.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from zkconsumer.bench.soak_check import Tally

__all__ = ["FaultRecord", "SoakResult", "duplicate_bound", "fault_window", "peak_rate"]

#: Largest producer batch (`zkconsumer.bench.soak_load.Load` ``max_batch``).
PRODUCER_BATCH = 20


@dataclass
class FaultRecord:
    kind: str
    target: str
    at: float                     # wall time the fault started
    ended: float                  # wall time it was undone (restart / SIGCONT)
    recovery: float | None = None  # seconds from ``ended`` to recovered; None = never
    unhealthy: dict[str, str] = field(default_factory=dict)  # member -> first non-200 seen

    def describe(self) -> str:
        rec = f"recovered in {self.recovery:.1f}s" if self.recovery is not None else \
            "NOT recovered"
        health = "".join(f"; {m} /healthz {h}" for m, h in sorted(self.unhealthy.items()))
        return (f"{self.kind} {self.target} at {time.strftime('%H:%M:%S', time.gmtime(self.at))}"
                f" (+{self.ended - self.at:.1f}s), {rec}{health}")


@dataclass
class SoakResult:
    seed: int
    seconds: float = 0.0
    faults: list[FaultRecord] = field(default_factory=list)
    tallies: dict[str, Tally] = field(default_factory=dict)   # "run", "mirror"
    bounds: dict[str, int] = field(default_factory=dict)       # duplicate bound per tally
    run_bounds: dict[str, int] = field(default_factory=dict)   # bound of one replay run
    peak_rates: dict[str, float] = field(default_factory=dict)  # msg/s per tally
    failures: list[str] = field(default_factory=list)
    workdir: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.failures

    def report(self) -> str:
        lines = [f"soak seed {self.seed}: {len(self.faults)} fault(s), {self.seconds:.0f}s, "
                 f"workdir {self.workdir}"]
        lines += [f"  fault {f.describe()}" for f in self.faults]
        for name, t in self.tallies.items():
            lines.append(f"  {name}: produced {t.produced}, in log {t.in_log} (+{t.log_duplicates}"
                         f" producer retries), consumed {t.consumed}, lost {t.lost}, "
                         f"duplicates {t.duplicates} (bound {self.bounds.get(name)}, peak "
                         f"{self.peak_rates.get(name, 0):.0f} msg/s; longest replay "
                         f"{t.longest_replay}, bound {self.run_bounds.get(name)}), "
                         f"torn {t.torn}, "
                         f"pending {sum(len(g.ids) for g in t.pending)}")
        lines += [f"  FAILURE: {f}" for f in self.failures]
        return "\n".join(lines)


def peak_rate(samples: Sequence[tuple[float, int]], window: float) -> float:
    """Highest units/s over any span of at least ``window`` seconds between samples."""
    best, j = 0.0, 0
    for i in range(len(samples)):
        while j < i and samples[i][0] - samples[j + 1][0] >= window:
            j += 1
        span = samples[i][0] - samples[j][0]
        if span >= window:
            best = max(best, (samples[i][1] - samples[j][1]) / span)
    return best


def duplicate_bound(*, rate: float, interval: float, partitions: int, max_in_flight: int,
                    hits: Sequence[int]) -> int:
    """Most duplicates a group may show; ``hits`` = members hit, one entry per fault."""
    base = rate * 2 * interval + partitions * PRODUCER_BATCH
    return int(sum(base + n * max_in_flight for n in hits))


def fault_window(faults: Sequence[FaultRecord], produced_at: Mapping[int, float],
                 ids: Sequence[int]) -> str:
    """When the ids of a gap were produced, and the (last three) faults before that."""
    times = [produced_at[i] for i in ids if i in produced_at]
    if not times:
        return "produce time unknown (not confirmed)"
    lo, hi = min(times), max(times)
    before = [f.describe() for f in faults if f.at <= hi + 1]
    fmt = "%H:%M:%S"
    return (f"produced {time.strftime(fmt, time.gmtime(lo))}.."
            f"{time.strftime(fmt, time.gmtime(hi))}; faults before: "
            + ("; ".join(before[-3:]) or "none"))
