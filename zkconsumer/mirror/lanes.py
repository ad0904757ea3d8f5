"""The life of a mirror lane -- one owned source partition -- as one state machine.

Every direction of the mirror (0.7 -> ``kafka://`` exactly-once, 0.7 -> anything
at-least-once, modern Kafka -> 0.7 bridge) keeps one lane per source partition it owns, and
every lane moves through the same states.  The table below is the whole protocol; `LaneStatus`
is the only writer of a lane's state, refuses a move the table does not list
(`MirrorError`: a bug here, never a peer's fault) and logs every move with the old and
new state, so a production log is a replayable trace of each partition's claim, failures and
release.

    CLAIMING   the group handed the partition to us; fencing / reading checkpoints / finding
               where to resume.  Nothing is written, nothing acknowledged.
    ACTIVE     writing: messages go to the target; what the target confirmed is acknowledged
               (committed) in source order.
    FAILED     the target failed a write of this lane; nothing past the failure is
               acknowledged.  The runtime backs off and recovers (resends from memory).
    RELEASED   revoked by a rebalance or closed at shutdown: what was confirmed is
               acknowledged, the rest is the next owner's.  Terminal.
    FENCED     another process owns the partition now (the target said so).  Terminal, and
               fatal for this process.

Legal moves::

    CLAIMING -> ACTIVE | RELEASED
    ACTIVE   -> FAILED | RELEASED | FENCED
    FAILED   -> ACTIVE | RELEASED | FENCED
"""

from __future__ import annotations

import logging
from enum import Enum

from zkconsumer.errors import MirrorError

__all__ = ["TRANSITIONS", "LaneState", "LaneStatus"]

log = logging.getLogger(__name__)


class LaneState(Enum):
    CLAIMING = "claiming"
    ACTIVE = "active"
    FAILED = "failed"
    RELEASED = "released"
    FENCED = "fenced"


#: Every legal move, one row per state (the module docstring draws it).
TRANSITIONS: dict[LaneState, frozenset[LaneState]] = {
    LaneState.CLAIMING: frozenset({LaneState.ACTIVE, LaneState.RELEASED}),
    LaneState.ACTIVE: frozenset({LaneState.FAILED, LaneState.RELEASED, LaneState.FENCED}),
    LaneState.FAILED: frozenset({LaneState.ACTIVE, LaneState.RELEASED, LaneState.FENCED}),
    LaneState.RELEASED: frozenset(),
    LaneState.FENCED: frozenset(),
}


class LaneStatus:
    """A lane's state and its one setter (see the module docstring)."""

    __slots__ = ("name", "state")

    def __init__(self, name: str) -> None:
        self.name = name
        self.state = LaneState.CLAIMING

    def move(self, new: LaneState, why: str = "") -> None:
        """Change state along a row of `TRANSITIONS`; a move to the same state is a no-op."""
        old = self.state
        if new is old:
            return
        if new not in TRANSITIONS[old]:
            raise MirrorError(f"lane {self.name}: illegal move {old.value} -> "
                                     f"{new.value}")
        self.state = new
        log.debug("lane %s: %s -> %s%s", self.name, old.value, new.value,
                  f" ({why})" if why else "")

    @property
    def active(self) -> bool:
        return self.state is LaneState.ACTIVE

    @property
    def live(self) -> bool:
        """Still ours: claiming, writing or recovering."""
        return self.state in (LaneState.CLAIMING, LaneState.ACTIVE, LaneState.FAILED)

    def __repr__(self) -> str:
        return f"LaneStatus({self.name!r}, {self.state.value})"
