"""Burrow-style evaluation of a partition's window of samples, and of a group (pure).

LinkedIn's Burrow judges a consumer by the *shape* of its recent history instead of a lag
threshold; this module applies its rules (core/internal/evaluator/caching.go) to what a 0.7
cluster can tell: the committed offset (and its znode's mtime, the time of the last write),
the log end, and who owns the partition.  Per partition, first match wins:

1. the offset or the log end cannot be read (garbage offset znode, broker down) -> ERR;
2. the ownership check of ``group describe --verify`` fails (no owner while the group has
   members, an owner that is not a live thread, an owner the range assignment does not name)
   in ``err_cycles`` consecutive samples -> ERR (one sample may catch a rebalance mid-way);
3. no offset committed yet, or lag <= ``allowed_lag`` -> OK;
4. the offset went down inside the window and has not come back to where it was -> REWIND
   (Burrow rule 2: a rebalance that re-commits an older offset and catches up is forgiven);
5. lag > 0 in every sample and the offset has not changed for longer than the window
   (``now - min(first sample showing this offset, znode mtime)``) -> STALL while a live thread
   owns the partition, STOP when none does (the members are gone);  (Burrow rules 3 and 4; the
   lag being zero anywhere in the window exempts, as Burrow's checkIfRecentLagZero does: an
   idle consumer whose producer just woke up is not stalled)
6. a full window, lag > 0 in every sample, the offset moving, and the lag never going down
   from one sample to the next -> WARN (Burrow rule 5: the consumer is slower than the
   producer);
7. otherwise OK.

A bridge's 0.7 partitions (`zkconsumer.monitor.bridges`) have their own three rules
(`evaluate_bridge_partition`: ERR unreadable, STOP no live bridge process, STALL a batch in
flight while nothing was confirmed for a window).

A group is the worst of its partitions (severity order in `zkconsumer.monitor.model`), ERR
if a member's registration is unreadable, at least NOTFOUND while a subscribed topic is not
registered by any broker.

Invariants: no clock, no I/O -- ``now`` and the samples come in, a verdict goes out, so every
rule is a table-driven unit test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

from zkconsumer.errors import ConfigurationError
from zkconsumer.monitor.model import GroupEval, GroupObs, PartitionEval, PartitionObs, Status, worst

__all__ = ["EvalConfig", "Sample", "evaluate_group", "evaluate_partition", "sample_of"]


class Sample(NamedTuple):
    """One poll's view of one partition (what the window store keeps)."""

    time: float                 # seconds, wall clock of the poll
    offset: int | None
    log_end: int | None
    committed_ms: int | None    # the offset znode's mtime
    problem: bool = False       # the ownership check failed at this poll

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end is None:
            return None
        return max(self.log_end - self.offset, 0)


def sample_of(time: float, obs: PartitionObs) -> Sample:
    return Sample(time, obs.offset, obs.log_end, obs.committed_ms, obs.problem is not None)


@dataclass(frozen=True)
class EvalConfig:
    """``window`` samples ``interval`` seconds apart (Burrow's ``intervals``, default 10)."""

    window: int = 10
    interval: float = 30.0
    allowed_lag: int = 0
    err_cycles: int = 2

    def __post_init__(self) -> None:
        if self.window < 2:
            raise ConfigurationError(f"--window must be >= 2 samples, got {self.window}")
        if not self.interval > 0:
            raise ConfigurationError(f"--interval must be > 0 seconds, got {self.interval}")
        if self.allowed_lag < 0 or self.err_cycles < 1:
            raise ConfigurationError("--allowed-lag must be >= 0 and err_cycles >= 1")

    @property
    def window_seconds(self) -> float:
        return self.window * self.interval


def evaluate_partition(obs: PartitionObs, samples: Sequence[Sample], now: float,
                       cfg: EvalConfig) -> tuple[Status, str]:
    """(status, why) of one partition; ``samples`` oldest first, the current one last."""
    samples = list(samples)
    window = samples[-cfg.window:]
    if obs.error:
        return Status.ERR, obs.error
    if obs.problem:
        run = 0
        for s in reversed(window):
            if not s.problem:
                break
            run += 1
        if run >= cfg.err_cycles:
            return Status.ERR, obs.problem
    lag = obs.lag
    if obs.offset is None:
        return Status.OK, "no offset committed yet (a member starts at autooffset.reset)"
    if lag is None or lag <= cfg.allowed_lag:
        return Status.OK, "caught up" if lag is not None else "log end unknown"
    offsets = [s.offset for s in window if s.offset is not None]
    for i in range(1, len(offsets)):
        before = offsets[i - 1]
        if offsets[i] < before and all(o < before for o in offsets[i:]):
            return Status.REWIND, (f"the committed offset went back from {before} to "
                                   f"{offsets[i]} and has not caught up")
    lags = [s.lag for s in window if s.lag is not None]
    recently_caught_up = any(x <= cfg.allowed_lag for x in lags)
    since = now  # the whole history, not just the window: a rewriting Scala member
    for s in reversed(samples):  # refreshes the mtime, so only our samples show the age
        if s.offset != obs.offset:
            break
        since = s.time
    if obs.committed_ms is not None:
        since = min(since, obs.committed_ms / 1000.0)
    unchanged = now - since
    if unchanged >= cfg.window_seconds and not recently_caught_up:
        if obs.owner_live:
            return Status.STALL, (f"lag {lag}, offset {obs.offset} unchanged for "
                                  f"{unchanged:.0f} s while {obs.owner} owns the partition")
        return Status.STOP, (f"lag {lag}, no commit for {unchanged:.0f} s and no live "
                             "member owns the partition")
    if (len(window) >= cfg.window and len(lags) == len(window) and not recently_caught_up
            and len({s.offset for s in window}) > 1
            and all(b >= a for a, b in pairwise(lags))):
        return Status.WARN, (f"lag grew from {lags[0]} to {lags[-1]} over {len(window)} "
                             "samples while the offset moved: slower than the producer")
    return Status.OK, "consuming"


def evaluate_bridge_partition(obs: PartitionObs, samples: Sequence[Sample],
                              cfg: EvalConfig) -> tuple[Status, str]:
    """(status, why) of one 0.7 partition a bridge writes (`zkconsumer.monitor.bridges`):
    ``offset`` is the bridge's written end, ``owner`` its batch in flight (or None)."""
    if obs.error:
        return Status.ERR, obs.error
    if not obs.owner_live:
        return Status.STOP, "no live bridge process: nothing is copied into 0.7"
    window = list(samples)[-(cfg.window + 1):]
    if obs.owner is not None and len(window) > cfg.window and \
            len({s.offset for s in window}) == 1:
        return Status.STALL, (f"batch {obs.owner} in flight while nothing was confirmed for "
                              "a whole window")
    return Status.OK, ("nothing written yet" if obs.offset is None
                       else f"written up to byte {obs.offset}")


def evaluate_group(obs: GroupObs, samples: Mapping[tuple[str, str], Sequence[Sample]], now: float,
                   cfg: EvalConfig, history: Sequence[tuple[float, int]] = ()) -> GroupEval:
    """Evaluate every partition of ``obs`` and summarise the group (module docstring)."""
    parts: list[PartitionEval] = []
    reasons = list(obs.problems)
    rule = evaluate_bridge_partition if obs.kind == "bridge" else \
        lambda p, s, c: evaluate_partition(p, s, now, c)
    for p in obs.partitions:
        status, why = rule(p, samples.get((p.topic, p.partition), ()), cfg)
        lag = None if obs.kind == "bridge" else p.lag
        parts.append(PartitionEval(p.topic, p.partition, status, why, p.owner, p.offset,
                                   p.log_end, lag, p.committed_ms, p.error, p.sources))
        if status is not Status.OK:
            reasons.append(f"{p.topic}/{p.partition} {status.value}: {why}")
    statuses = [p.status for p in parts]
    if obs.problems:
        statuses.append(Status.ERR)
    for topic in obs.unregistered_topics:
        statuses.append(Status.NOTFOUND)
        reasons.append(f"{topic}: topic not registered by any broker (members wait for it)")
    total = sum(p.lag or 0 for p in parts)
    recent = [lag for t, lag in history if t >= now - cfg.window_seconds]
    trend = total - recent[0] if recent else 0
    return GroupEval(obs.group, worst(statuses), reasons, obs.members, parts, total,
                     obs.unregistered_topics, now, trend, kind=obs.kind, history=list(history))
