"""Offsets files: Scala ExportZkOffsets lines and JSON, parsed strictly with line numbers."""

from __future__ import annotations

import json

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.migrate.offsets import Change, format_json, format_scala, parse_offsets_text

OFFSETS = {"g1": {"topic1": {"1-0": 286894308, "0-1": 5}, "my-topic": {"0-0": 0}},
           "g2": {"t": {"10-3": 7}}}


def test_scala_format_is_exportzkoffsets_lines_sorted() -> None:
    text = format_scala({"group1": {"topic1": {"1-0": 286894308}}})
    assert text == "/consumers/group1/offsets/topic1/1-0:286894308\n"
    lines = format_scala(OFFSETS).splitlines()
    assert lines == sorted(lines) and len(lines) == 4


@pytest.mark.parametrize("fmt", [format_scala, format_json])
def test_round_trip(fmt: object) -> None:
    assert parse_offsets_text(fmt(OFFSETS)) == OFFSETS  # type: ignore[operator]
    single = {"g1": OFFSETS["g1"]}
    assert parse_offsets_text(fmt(single)) == single  # type: ignore[operator]


def test_json_single_group_shape() -> None:
    doc = json.loads(format_json({"g": {"t": {"0-0": 3}}}))
    assert doc == {"group": "g", "offsets": {"t": {"0-0": 3}}}


def test_scala_file_from_the_scala_tool_with_blank_lines_and_comments() -> None:
    text = "# exported\n/consumers/g/offsets/t/0-0:12\n\n/consumers/g/offsets/t/0-1:0\n"
    assert parse_offsets_text(text) == {"g": {"t": {"0-0": 12, "0-1": 0}}}


def test_every_bad_line_is_reported_with_its_number() -> None:
    text = ("/consumers/g/offsets/t/0-0:12\n"
            "/consumers/g/offsets/t/0-1:\n"          # empty (samsa's poison)
            "/consumers/g/offsets/t/0-2:abc\n"       # non-numeric
            "/consumers/g/offsets/t/x-2:1\n"         # bad partition name
            "/consumers/g/offsets/t/0-0:13\n"        # duplicate
            "/consumers/g/offsets/t/0-3:-4\n"        # negative
            "garbage\n")
    with pytest.raises(ConfigurationError) as info:
        parse_offsets_text(text, "f.txt")
    msg = str(info.value)
    assert "nothing written" in msg
    for n in (2, 3, 4, 5, 6, 7):
        assert f"f.txt:{n}:" in msg
    assert "f.txt:1:" not in msg


def test_bad_json_values_are_reported() -> None:
    text = json.dumps({"group": "g", "offsets": {"t": {"0-0": 1, "0-1": "", "0-2": -1,
                                                       "0-3": 1.5, "bad": 2}}}, indent=2)
    with pytest.raises(ConfigurationError) as info:
        parse_offsets_text(text, "f.json")
    msg = str(info.value)
    for part in ("0-1", "0-2", "0-3", "'bad'"):
        assert part in msg
    assert "0-0" not in msg
    with pytest.raises(ConfigurationError, match="empty"):
        parse_offsets_text("  \n")
    with pytest.raises(ConfigurationError, match="invalid JSON"):
        parse_offsets_text("{nope")


def test_change_describe() -> None:
    assert Change("g", "t", "0-0", None, 5).describe() == "g t 0-0: none -> 5"
    assert Change("g", "t", "0-0", 5, 5).describe() == "g t 0-0: 5 -> 5 (unchanged)"
