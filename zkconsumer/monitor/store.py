"""The sample windows: the last ``keep`` samples of every partition and every group's lag.

In memory always; with ``path`` also in a small SQLite file, so a restarted monitor evaluates
with the history it had (a STALL stays a STALL across a restart instead of needing a fresh
window).  What it holds: ``keep`` samples per partition (one row each, ~100 bytes with the
index, measured) and ``keep`` (time, total lag) points per group -- ``--history 240`` at
``--interval 30`` is two hours; 500 groups x 100 partitions then hold 12 million rows
(~1.2 GB), so large clusters keep the file off or the history short.  Older rows are
deleted at every poll.

Invariants: a group or partition that disappears from a poll is forgotten (memory and file)
-- its history would otherwise grow stale forever; samples are appended in poll order, so
each window is sorted by time.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterable

from zkconsumer.monitor.evaluator import Sample, sample_of
from zkconsumer.monitor.model import Cycle

__all__ = ["WindowStore"]

Key = tuple[str, str, str]  # group, topic, partition

_SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (grp TEXT, topic TEXT, part TEXT, time REAL, offset INTEGER,
    log_end INTEGER, committed_ms INTEGER, problem INTEGER);
CREATE INDEX IF NOT EXISTS samples_key ON samples (grp, topic, part, time);
CREATE TABLE IF NOT EXISTS group_lag (grp TEXT, time REAL, lag INTEGER);
CREATE INDEX IF NOT EXISTS group_lag_key ON group_lag (grp, time);
"""


class WindowStore:
    """Bounded per-partition sample windows and per-group lag series."""

    def __init__(self, keep: int, path: str | None = None) -> None:
        self.keep = keep
        self._samples: dict[str, dict[tuple[str, str], deque[Sample]]] = {}
        self._lag: dict[str, deque[tuple[float, int]]] = {}
        self._db: sqlite3.Connection | None = None
        if path:
            self._db = sqlite3.connect(path, check_same_thread=False)
            self._db.executescript(_SCHEMA)
            self._load()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def _load(self) -> None:
        assert self._db is not None
        for grp, topic, part, *row in self._db.execute(
                "SELECT grp, topic, part, time, offset, log_end, committed_ms, problem "
                "FROM samples ORDER BY time"):
            self._window((grp, topic, part)).append(
                Sample(row[0], row[1], row[2], row[3], bool(row[4])))
        for grp, t, lag in self._db.execute("SELECT grp, time, lag FROM group_lag ORDER BY time"):
            self._series(grp).append((t, lag))

    def _window(self, key: Key) -> deque[Sample]:
        per_group = self._samples.setdefault(key[0], {})
        window = per_group.get(key[1:])
        if window is None:
            window = per_group[key[1:]] = deque(maxlen=self.keep)
        return window

    def _series(self, group: str) -> deque[tuple[float, int]]:
        series = self._lag.get(group)
        if series is None:
            series = self._lag[group] = deque(maxlen=self.keep)
        return series

    def add(self, cycle: Cycle) -> None:
        """Append every partition's sample and every group's total lag; forget the absent."""
        rows: list[tuple[object, ...]] = []
        seen: set[Key] = set()
        for group, obs in cycle.groups.items():
            total = 0
            for p in obs.partitions:
                key = (group, p.topic, p.partition)
                seen.add(key)
                s = sample_of(cycle.time, p)
                self._window(key).append(s)
                total += (s.lag or 0) if obs.kind == "group" else 0
                rows.append((*key, *s[:4], int(s.problem)))
            self._series(group).append((cycle.time, total))
        gone = [(g, *k) for g, per in self._samples.items() for k in per if (g, *k) not in seen]
        for g, topic, part in gone:
            del self._samples[g][(topic, part)]
        for group in [g for g in self._lag if g not in cycle.groups]:
            del self._lag[group]
            self._samples.pop(group, None)
        if self._db is not None:
            self._persist(cycle, rows, gone)

    def _persist(self, cycle: Cycle, rows: list[tuple[object, ...]], gone: Iterable[Key]) -> None:
        assert self._db is not None
        with self._db:
            self._db.executemany("INSERT INTO samples VALUES (?,?,?,?,?,?,?,?)", rows)
            self._db.executemany("INSERT INTO group_lag VALUES (?,?,?)",
                                 [(g, cycle.time, self._lag[g][-1][1]) for g in cycle.groups])
            self._db.executemany("DELETE FROM samples WHERE grp=? AND topic=? AND part=?",
                                 list(gone))
            oldest = {g: s[0][0] for g, s in self._lag.items() if s}
            self._db.executemany("DELETE FROM samples WHERE grp=? AND time<?",
                                 list(oldest.items()))
            self._db.executemany("DELETE FROM group_lag WHERE grp=? AND time<?",
                                 list(oldest.items()))
            self._db.execute("DELETE FROM group_lag WHERE grp NOT IN (SELECT DISTINCT grp FROM "
                             "samples) AND time < ?", (cycle.time,))

    def samples(self, group: str) -> dict[tuple[str, str], deque[Sample]]:
        return self._samples.get(group, {})

    def history(self, group: str) -> list[tuple[float, int]]:
        return list(self._lag.get(group, ()))
