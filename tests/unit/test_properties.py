"""Java .properties parsing (java.util.Properties.load rules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.properties import load_properties, parse_properties


def test_separators_and_whitespace() -> None:
    text = "a=1\nb: 2\nc 3\n  d  =  4\ne\t:\t5\nf=\ng\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5",
                                      "f": "", "g": ""}


def test_comments_and_blank_lines() -> None:
    text = "# comment\n! also\n\n   # indented comment\nk=v # not a comment\n"
    assert parse_properties(text) == {"k": "v # not a comment"}


def test_line_continuations() -> None:
    text = "list=a,\\\n    b,\\\n    c\nnext=1\n"
    assert parse_properties(text) == {"list": "a,b,c", "next": "1"}
    # an even number of backslashes is an escaped backslash, not a continuation
    assert parse_properties("k=a\\\\\nx=1\n") == {"k": "a\\", "x": "1"}
    # a continued line starting with # is value text, not a comment
    assert parse_properties("k=a\\\n#b\n") == {"k": "a#b"}


def test_escapes() -> None:
    text = "k\\=ey=v\\tal\\u0041\\n\nsp\\ ace=x\nc\\:olon=y\n"
    assert parse_properties(text) == {"k=ey": "v\talA\n", "sp ace": "x", "c:olon": "y"}
    with pytest.raises(ConfigurationError, match="line 1"):
        parse_properties("k=\\u00g1\n")


def test_later_key_wins_and_crlf() -> None:
    assert parse_properties("k=1\r\nk=2\r\n") == {"k": "2"}


def test_load_file(tmp_path: Path) -> None:
    path = tmp_path / "consumer.properties"
    path.write_bytes(b"groupid=g1\nzk.connect=127.0.0.1:2181\ncaf\xe9=1\n")  # latin-1
    assert load_properties(path) == {"groupid": "g1", "zk.connect": "127.0.0.1:2181",
                                     "caf\u00e9": "1"}
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_properties(tmp_path / "missing.properties")


def test_parse_settings_is_the_command_line_form_of_a_properties_file() -> None:
    from zkconsumer.errors import ConfigurationError
    from zkconsumer.properties import parse_settings

    assert parse_settings(["a=1", " b = x=y ", "a=2"]) == {"a": "2", "b": "x=y"}
    for bad in ("novalue", "=v", " =v"):
        with pytest.raises(ConfigurationError, match=r"--set .*expected key=value"):
            parse_settings([bad])
    with pytest.raises(ConfigurationError, match=r"--property 'x'"):
        parse_settings(["x"], flag="--property")
