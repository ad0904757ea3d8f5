"""The lane state machine shared by every mirror direction (mirror/lanes.py): the table is
the protocol, `LaneStatus.move` the only writer."""

from __future__ import annotations

import itertools
import logging

import pytest

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.lanes import TRANSITIONS, LaneState, LaneStatus


def _at(state: LaneState) -> LaneStatus:
    """A lane brought to ``state`` along legal moves."""
    lane = LaneStatus("t/0-0")
    path = {LaneState.CLAIMING: [], LaneState.ACTIVE: [LaneState.ACTIVE],
            LaneState.FAILED: [LaneState.ACTIVE, LaneState.FAILED],
            LaneState.RELEASED: [LaneState.RELEASED],
            LaneState.FENCED: [LaneState.ACTIVE, LaneState.FENCED]}[state]
    for step in path:
        lane.move(step)
    assert lane.state is state
    return lane


@pytest.mark.parametrize(("old", "new"), list(itertools.product(LaneState, LaneState)))
def test_every_move_is_legal_exactly_when_the_table_lists_it(old: LaneState,
                                                             new: LaneState) -> None:
    lane = _at(old)
    if new is old or new in TRANSITIONS[old]:
        lane.move(new)
        assert lane.state is new
    else:
        with pytest.raises(MirrorError, match="illegal move"):
            lane.move(new)
        assert lane.state is old


def test_released_and_fenced_are_terminal_and_only_claims_start() -> None:
    assert not TRANSITIONS[LaneState.RELEASED] and not TRANSITIONS[LaneState.FENCED]
    assert LaneStatus("x").state is LaneState.CLAIMING
    reachable = {s for targets in TRANSITIONS.values() for s in targets}
    assert LaneState.CLAIMING not in reachable


def test_moves_are_logged_with_old_and_new_state(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="zkconsumer.mirror.lanes")
    lane = LaneStatus("orders/1-0")
    lane.move(LaneState.ACTIVE, "claimed")
    lane.move(LaneState.FAILED, "timeout")
    assert [r.getMessage() for r in caplog.records] == [
        "lane orders/1-0: claiming -> active (claimed)",
        "lane orders/1-0: active -> failed (timeout)"]
    assert lane.live and not lane.active
