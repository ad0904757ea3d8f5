"""docs/architecture.md draws the member's state machine; the drawing is the table."""

from __future__ import annotations

import re
from pathlib import Path

from zkconsumer.consumer.member_state import TRANSITIONS, MemberState

DOC = Path(__file__).resolve().parents[3] / "docs" / "architecture.md"


def _diagram_arrows() -> set[tuple[str, str]]:
    text = DOC.read_text()
    section = text.split("### The member's state machine", 1)[1]
    block = section.split("```mermaid", 1)[1].split("```", 1)[0]
    arrows = set()
    for line in block.splitlines():
        m = re.match(r"\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)", line)
        if m and "[*]" not in m.groups():
            arrows.add((m.group(1), m.group(2)))
    return arrows


def test_the_diagram_is_the_transition_table() -> None:
    table = {(old.name, new.name) for old, news in TRANSITIONS.items() for new in news}
    drawn = _diagram_arrows()
    assert drawn - table == set(), "drawn but not legal"
    assert table - drawn == set(), "legal but not drawn"


def test_every_state_is_drawn() -> None:
    named = {name for arrow in _diagram_arrows() for name in arrow}
    assert named == {s.name for s in MemberState}
