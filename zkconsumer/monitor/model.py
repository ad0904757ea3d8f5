"""What the monitor observes and decides: statuses, one poll's observations, evaluations.

Statuses are Burrow's (LinkedIn's lag evaluator), with Burrow's numbers for the Prometheus
``status`` gauges so dashboards written for Burrow's exporters read ours unchanged; the
*severity* order (worst wins when a group is summarised) is ours and is the order of
`Status.severity`: OK < NOTFOUND < WARN < REWIND < STALL < STOP < ERR.

Invariants: every type here is plain data (no I/O), JSON-able through ``as_dict``; an
observation is immutable once a poll produced it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Cycle", "GroupEval", "GroupObs", "MemberObs", "PartitionEval", "PartitionObs",
           "Status", "exit_status"]


class Status(str, Enum):
    """One evaluation outcome (docs/operations.md, "Monitor", has an example of each)."""

    OK = "OK"
    NOTFOUND = "NOTFOUND"  # a subscribed topic no broker has registered ("topic not registered")
    WARN = "WARN"          # lag grew over the whole window while the offset moved
    REWIND = "REWIND"      # the committed offset moved backwards and has not caught up again
    STALL = "STALL"        # lag > 0, a live owner, and the offset has not moved for a window
    STOP = "STOP"          # lag > 0, no live owner, and no commit for longer than the window
    ERR = "ERR"            # ownership broken (unowned / wrong owner) or the partition unreadable

    @property
    def number(self) -> int:
        """Burrow's StatusConstant (NOTFOUND 0, OK 1, WARN 2, ERR 3, STOP 4, STALL 5, REWIND 6)."""
        return _NUMBERS[self]

    @property
    def severity(self) -> int:
        return _SEVERITY.index(self)


_NUMBERS = {Status.NOTFOUND: 0, Status.OK: 1, Status.WARN: 2, Status.ERR: 3, Status.STOP: 4,
            Status.STALL: 5, Status.REWIND: 6}
_SEVERITY = [Status.OK, Status.NOTFOUND, Status.WARN, Status.REWIND, Status.STALL, Status.STOP,
             Status.ERR]


def worst(statuses: list[Status]) -> Status:
    return max(statuses, key=lambda s: s.severity, default=Status.OK)


def exit_status(statuses: list[Status]) -> int:
    """``--once``'s exit status: 0 all OK, 1 a warning (WARN, REWIND, NOTFOUND), 2 a failure
    (ERR, STALL, STOP) -- the Nagios convention of OK / WARNING / CRITICAL."""
    w = worst(statuses)
    if w.severity >= Status.STALL.severity:
        return 2
    return 0 if w is Status.OK else 1


@dataclass(frozen=True, slots=True)
class MemberObs:
    consumer_id: str
    registration: str
    threads: dict[str, list[str]]  # topic -> thread ids
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionObs:
    """One partition of one group at one poll.

    ``committed_ms`` is the offset znode's mtime (ZooKeeper's clock: the last write);
    ``error`` says why ``offset`` or ``log_end`` is unknown (garbage znode, broker down).
    """

    topic: str
    partition: str
    owner: str | None
    owner_live: bool
    expected_owner: str | None
    offset: int | None
    committed_ms: int | None
    log_end: int | None
    error: str | None = None     # offset or log end unreadable
    problem: str | None = None   # ownership broken (the `group describe --verify` check)
    sources: dict[str, int] | None = None  # a bridge's source positions ("topic/p" -> next)

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.log_end is None:
            return None
        return max(self.log_end - self.offset, 0)


@dataclass(frozen=True)
class GroupObs:
    group: str
    members: list[MemberObs]
    partitions: list[PartitionObs]
    problems: list[str]               # members with unreadable registrations
    unregistered_topics: list[str]    # subscribed, but no broker registered them
    kind: str = "group"               # "group" (a 0.7 consumer group) or "bridge"


@dataclass(frozen=True)
class Cycle:
    """One poll: every group's observations plus what the poll cost."""

    time: float                      # wall clock, seconds (the samples' timestamp)
    groups: dict[str, GroupObs]
    duration: float = 0.0
    zk_reads: int = 0
    broker_requests: int = 0
    broker_errors: int = 0


@dataclass(frozen=True, slots=True)
class PartitionEval:
    topic: str
    partition: str
    status: Status
    reason: str
    owner: str | None
    offset: int | None
    log_end: int | None
    lag: int | None
    committed_ms: int | None
    error: str | None
    sources: dict[str, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        return out


@dataclass
class GroupEval:
    group: str
    status: Status
    reasons: list[str]
    members: list[MemberObs]
    partitions: list[PartitionEval]
    total_lag: int
    unregistered_topics: list[str]
    evaluated_at: float
    trend: int = 0                    # total lag now minus at the start of the window
    kind: str = "group"
    history: list[tuple[float, int]] = field(default_factory=list)  # (time, total lag)
    target: dict[str, Any] | None = None  # a mirror's target side (`--mirror`), if known

    def as_dict(self, *, history: bool = True) -> dict[str, Any]:
        return {
            "group": self.group,
            "kind": self.kind,
            "status": self.status.value,
            "reasons": self.reasons,
            "members": [asdict(m) for m in self.members],
            "partitions": [p.as_dict() for p in self.partitions],
            "total_lag": self.total_lag,
            "trend": self.trend,
            "unregistered_topics": self.unregistered_topics,
            **({"target": self.target} if self.target is not None else {}),
            "evaluated_at": self.evaluated_at,
            **({"history": [[t, lag] for t, lag in self.history]} if history else {}),
        }
