"""Pure pieces of translate / verify: topic grouping, the plan table, the direct-write notes."""

from __future__ import annotations

from collections import Counter

from zkconsumer.mirror.provenance import format_columns, targets_of
from zkconsumer.mirror.verify import TopicTally, direct_notes


def test_targets_of_groups_merged_sources() -> None:
    assert targets_of(["a", "b", "c"], {"a": "m", "b": "m"}) == {"m": {"a", "b"}, "c": {"c"}}
    assert targets_of([], {"a": "m"}) == {}


def test_format_columns_aligns_and_strips() -> None:
    out = format_columns(("topic", "n"), [("orders-new", "1"), ("a", "12345")])
    assert out.splitlines() == ["topic       n", "orders-new  1", "a           12345"]
    assert format_columns(("only", "header"), []) == "only  header"


def test_absorb_counts_and_digests() -> None:
    mirrored = TopicTally(digests=Counter())
    mirrored.add("0", 2, [b"x", b"y"])
    direct = TopicTally(digests=Counter())
    direct.add("0", 1, [b"z"])
    direct.add("1", 1, [b"x"])
    mirrored.absorb(direct)
    assert mirrored.messages == 4 and mirrored.partitions == {"0": 3, "1": 1}
    assert mirrored.digests is not None and sum(mirrored.digests.values()) == 4


def test_direct_notes_name_what_was_left_out() -> None:
    notes = direct_notes({"a": TopicTally(direct=7), "b": TopicTally(headerless=True),
                          "c": TopicTally()})
    assert notes == ["a: 7 records written on target (no provenance headers) are not counted "
                     "(--include-direct-writes counts them)",
                     "b: no record carries provenance headers (an --at-least-once mirror?): "
                     "every record counted"]
