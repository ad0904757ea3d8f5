"""verify's comparison and table (the counting itself is exercised end to end)."""

from __future__ import annotations

from collections import Counter

from zkconsumer.mirror.verify import TopicTally, compare, format_table


def tally(n: int, payloads: list[bytes] | None = None) -> TopicTally:
    t = TopicTally(digests=Counter() if payloads is not None else None)
    t.add("0", n, payloads or [])
    return t


def test_rows_per_target_topic_with_merged_sources() -> None:
    source = {"a": tally(3), "b": tally(2), "c": tally(5), "d": tally(1)}
    target = {"x": tally(5), "c": tally(4), "d": tally(2)}
    rows = compare(source, target, {"a": "x", "b": "x"})
    assert [(r.target_topic, r.source_topics, r.source, r.target, r.status) for r in rows] == [
        ("c", ("c",), 5, 4, "MISSING"),
        ("d", ("d",), 1, 2, "EXTRA"),
        ("x", ("a", "b"), 5, 5, "OK"),
    ]


def test_a_target_topic_that_does_not_exist_counts_zero() -> None:
    (row,) = compare({"a": tally(1)}, {}, {})
    assert (row.target, row.status) == (0, "MISSING")


def test_payload_digests_find_a_loss_hidden_by_a_duplicate() -> None:
    source = {"a": tally(2, [b"one", b"two"])}
    target = {"a": tally(2, [b"one", b"one"])}
    (row,) = compare(source, target, {})
    assert (row.missing_payloads, row.status) == (1, "MISSING")
    (ok,) = compare(source, {"a": tally(3, [b"two", b"one", b"one"])}, {})
    assert (ok.missing_payloads, ok.status) == (0, "EXTRA")


def test_table_layout() -> None:
    rows = compare({"a": tally(10)}, {"a": tally(10)}, {})
    lines = format_table(rows).splitlines()
    assert lines[0].split() == ["source", "topic(s)", "target", "topic", "source", "msgs",
                                "target", "msgs", "missing", "status"]
    assert lines[1].split() == ["a", "a", "10", "10", "-", "OK"]
