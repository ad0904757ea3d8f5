"""The sample windows: bounded, forgetful of vanished groups and partitions, and -- with a
SQLite file -- the same after a restart."""

from __future__ import annotations

from pathlib import Path

from zkconsumer.monitor.model import Cycle, GroupObs, PartitionObs
from zkconsumer.monitor.store import WindowStore


def cycle(t: float, groups: dict[str, list[tuple[str, int, int]]]) -> Cycle:
    return Cycle(t, {g: GroupObs(g, [], [PartitionObs("t", p, None, False, None, off, 7, end)
                                         for p, off, end in parts], [], [])
                     for g, parts in groups.items()})


def test_windows_are_bounded_and_forget_what_vanished() -> None:
    store = WindowStore(keep=3)
    for i in range(5):
        store.add(cycle(float(i), {"a": [("0-0", i, 10), ("0-1", 0, 0)], "b": [("0-0", 1, 1)]}))
    assert [s.offset for s in store.samples("a")[("t", "0-0")]] == [2, 3, 4]
    assert store.history("a") == [(2.0, 8), (3.0, 7), (4.0, 6)]
    store.add(cycle(5.0, {"a": [("0-0", 5, 10)]}))
    assert set(store.samples("a")) == {("t", "0-0")}
    assert store.samples("b") == {} and store.history("b") == []


def test_sqlite_keeps_the_history_across_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "monitor.db")
    store = WindowStore(keep=3, path=path)
    for i in range(5):
        store.add(cycle(float(i), {"a": [("0-0", i, 10)], "b": [("0-0", 1, 1)]}))
    store.add(cycle(5.0, {"a": [("0-0", 5, 10)]}))
    before = (list(store.samples("a")[("t", "0-0")]), store.history("a"))
    store.close()
    again = WindowStore(keep=3, path=path)
    try:
        assert (list(again.samples("a")[("t", "0-0")]), again.history("a")) == before
        assert again.samples("b") == {}
        assert [s.offset for s in before[0]] == [3, 4, 5]
        rows = again._db.execute("SELECT COUNT(*) FROM samples").fetchone()[0]  # type: ignore[union-attr]
        assert rows == 3  # older rows deleted, not just hidden
    finally:
        again.close()
