"""``zkconsumer bench soak``: seeded fault-injection soak runs of ``run`` and ``mirror``.

Each run (`zkconsumer.bench.soak_run.run_soak`) starts its own ZooKeeper (behind a TCP proxy)
and dev brokers, a group of ``zkconsumer run`` members (``--output``, ``--exec``,
``--handler``), a lone ``run`` member in a group of its own, and a group of ``zkconsumer
mirror`` members, produces numbered messages
(plain, gzip, snappy, keyed; confirmed) and injects faults chosen by ``random.Random(seed)``:
kill -9 / SIGTERM / SIGSTOP past the session timeout of members, kill -9 and restart of a
broker and of ZooKeeper, dropped ZooKeeper connections.  Then it waits for lag 0 and counts
from the members' outputs and the logs.

Prints one line per run, then the table::

    seed  faults  produced  consumed  lost  duplicates  bound  mirror lost/dups  time
       1       9    41230    41530     0         300   8250            0/120  75s

``lost`` counts messages a group committed past without writing them; ``duplicates`` and
``bound`` sum the ``run`` and lone groups (the mirror has its own column).  Then the
recovery times per fault kind (median, max).

Exit status: 0 every run lost nothing, recovered from every fault and stayed inside the
duplicate bounds, 1 otherwise (the failures are printed: partition, offsets and ids of each
gap, the faults before it, member log tails; the work directory is kept), 2 usage.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from zkconsumer.bench.soak_result import SoakResult
from zkconsumer.bench.soak_run import EXTRA_FAULTS, FAULTS, SoakConfig, run_soak
from zkconsumer.errors import UsageError

HELP = "fault-injection soak of zkconsumer run and mirror: lost and duplicate messages"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("examples:\n  zkconsumer bench soak --seed 1\n"
                     "  zkconsumer bench soak --seed 100 --runs 10 --duration 120\n"
                     "  zkconsumer bench soak --fault zk-drop --fault member-stop --no-mirror\n\n"
                     "exit status: 0 nothing lost in any run, 1 a run lost messages, exceeded the "
                     "duplicate bound or did not recover, 2 usage")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--seed", type=int, default=1, help="seed of the first run (default 1)")
    parser.add_argument("--runs", type=int, default=1, metavar="K",
                        help="runs, with seeds seed, seed+1, ... (default 1)")
    parser.add_argument("--duration", type=float, default=0.0, metavar="S",
                        help="after one fault of each kind, keep injecting random faults "
                             "until S seconds passed since the first (default 0)")
    parser.add_argument("--fault", action="append", choices=FAULTS + EXTRA_FAULTS,
                        help="only these fault kinds (repeatable; default: all but "
                             "member-start-stop)")
    parser.add_argument("--rate", type=float, default=1000.0, metavar="MSG_S",
                        help="messages produced per second (default 1000)")
    parser.add_argument("--no-mirror", action="store_true",
                        help="leave out the zkconsumer mirror group")
    parser.add_argument("--dir", metavar="DIR",
                        help="work directory: member logs and outputs, broker and ZooKeeper "
                             "data (default: a new temporary one; always kept)")


def _row(r: SoakResult) -> str:
    groups = [t for name, t in r.tallies.items() if name != "mirror"]
    mirror = r.tallies.get("mirror")
    m = f"{mirror.lost}/{mirror.duplicates}" if mirror else "-"
    if not groups:
        return f"{r.seed:>6}  {len(r.faults):>6}  (no count: {r.failures[:1]})"
    consumed = sum(t.consumed for t in groups)
    lost = sum(t.lost for t in groups)
    dups = sum(t.duplicates for t in groups)
    bound = sum(v for k, v in r.bounds.items() if k != "mirror")
    return (f"{r.seed:>6}  {len(r.faults):>6}  {groups[0].produced:>8}  {consumed:>8}  "
            f"{lost:>4}  {dups:>10}  {bound:>6}  {m:>16}  {r.seconds:>4.0f}s"
            f"  {'ok' if r.ok else 'FAIL'}")


def main(args: argparse.Namespace) -> int:
    if args.runs < 1:
        raise UsageError("--runs must be >= 1")
    if args.rate <= 0:
        raise UsageError("--rate must be > 0")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="zkc-soak-"))
    results = []
    for k in range(args.runs):
        seed = args.seed + k
        config = SoakConfig(seed=seed, workdir=base / f"seed-{seed}",
                            faults=tuple(args.fault or FAULTS), duration=args.duration,
                            rate=args.rate, mirror=not args.no_mirror)
        result = run_soak(config)
        results.append(result)
        print(result.report(), flush=True)
    print("\n  seed  faults  produced  consumed  lost  duplicates   bound  mirror lost/dups"
          "  time")
    for r in results:
        print(_row(r))
    recoveries: dict[str, list[float]] = {}
    for r in results:
        for f in r.faults:
            if f.recovery is not None:
                recoveries.setdefault(f.kind, []).append(f.recovery)
    for kind, times in sorted(recoveries.items()):
        times.sort()
        print(f"recovery {kind}: n={len(times)} median {times[len(times) // 2]:.1f}s "
              f"max {times[-1]:.1f}s")
    return 0 if all(r.ok for r in results) else 1
