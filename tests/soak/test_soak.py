"""The permanent fault-injection soak (issue 11): real ZooKeeper, brokers and members.

`zkconsumer.bench.soak_run.run_soak` runs the whole scenario: its own ZooKeeper behind a TCP
proxy, two dev broker processes (2 partitions each), a ``zkconsumer run`` group (``--output``
with two streams, ``--exec``, ``--handler``), a lone two-stream member in a group of its own
(issue 11's repro A) and a ``zkconsumer mirror`` group (0.7 -> 0.7,
confirmed produce), numbered messages produced throughout (plain, gzip, snappy, keyed), and
faults in a seeded order: kill -9 / SIGTERM / SIGSTOP past the session timeout of a member,
kill -9 + restart of a broker and of ZooKeeper, dropped ZooKeeper connections.  After each
fault the groups must be whole again (every partition owned as the 0.7 assignment of the
live threads says, consumption past the fault) within a bound; at the end lag 0, nothing
lost, duplicates within the bound.

* ``test_soak_bounded`` -- one run, every fault kind once (~50 s here); in the default run.
* ``test_soak_long`` -- ``pytest -m soak``: ten seeds, each with two minutes of random
  faults after the first round.  ``ZKCONSUMER_SOAK_SEEDS=1,2,3`` /
  ``ZKCONSUMER_SOAK_DURATION=60`` change them.  ``zkconsumer bench soak`` runs the same
  from the command line and prints the table.

A failure message lists every gap (partition, offsets, ids, the faults before it), every
member that exited on its own or did not recover, with log tails; the work directory (member
logs, outputs, broker and ZooKeeper logs) is kept under pytest's tmp_path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zkconsumer.bench.soak_run import SoakConfig, run_soak

#: ``ZKCONSUMER_SOAK_SEED=N`` runs the bounded soak with another schedule (reproducible too).
BOUNDED_SEED = int(os.environ.get("ZKCONSUMER_SOAK_SEED", "11"))


def _check(config: SoakConfig) -> None:
    result = run_soak(config)
    print(result.report())
    assert result.ok, result.report()
    assert {f.kind for f in result.faults} >= set(config.faults)
    for name in ("run", "lone", "mirror"):
        tally = result.tallies[name]
        assert tally.produced > 0 and tally.lost == 0 and not tally.pending, name
        assert tally.consumed >= tally.produced, name


@pytest.mark.slow
def test_soak_bounded(tmp_path: Path) -> None:
    _check(SoakConfig(seed=BOUNDED_SEED, workdir=tmp_path / "soak"))


def _seeds() -> list[int]:
    raw = os.environ.get("ZKCONSUMER_SOAK_SEEDS", "")
    return [int(s) for s in raw.split(",") if s.strip()] or list(range(1, 11))


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.parametrize("seed", _seeds())
def test_soak_long(tmp_path: Path, seed: int) -> None:
    duration = float(os.environ.get("ZKCONSUMER_SOAK_DURATION", "120"))
    _check(SoakConfig(seed=seed, workdir=tmp_path / "soak", duration=duration,
                      recovery_timeout=60.0))
