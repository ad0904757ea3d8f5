"""Topic validation (REFERENCE §4.6 + ASCII) and the Java hash used by the partitioner."""

from __future__ import annotations

import pytest

from zkconsumer.errors import InvalidTopicError, LocalProtocolError
from zkconsumer.protocol import default_partition, java_string_hashcode, validate_topic


@pytest.mark.parametrize("name", ["a", "test-topic", "with.dots", "under_score", "UPPER",
                                  "-", "...", "x" * 255, "a b", "~!@#$%^&*()"])
def test_valid_topics(name: str) -> None:
    validate_topic(name)


@pytest.mark.parametrize("name,reason", [
    ("", "empty"),
    ("x" * 256, "longer than 255"),
    (".", "not allowed"),
    ("..", "not allowed"),
    ("a/b", "illegal character"),
    ("nul\x00", "illegal character"),
    ("tab\t", "illegal character"),
    ("del\x7f", "illegal character"),
    ("c1\x85", "illegal character"),
    ("sur\ud800", "illegal character"),
    ("pua\uf8ff", "illegal character"),
    ("spec\ufff0", "illegal character"),
    ("bom\uffff", "illegal character"),
    ("caf\u00e9", "not ASCII"),
    ("\u4e2d\u6587", "not ASCII"),
])
def test_invalid_topics(name: str, reason: str) -> None:
    with pytest.raises(InvalidTopicError, match=reason):
        validate_topic(name)


def test_topic_must_be_str() -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic(b"bytes")  # type: ignore[arg-type]


@pytest.mark.parametrize("text,expected", [
    ("", 0),
    ("a", 97),
    ("0", 48),
    ("hello", 99162322),
    ("Aa", 2112),
    ("BB", 2112),
    ("polygenelubricants", -(2**31)),  # Int.MinValue
    ("key-1", 101943363),  # 'k'*31^4 + 'e'*31^3 + 'y'*31^2 + '-'*31 + '1'
    ("\U0001f600", 1772899),  # non-BMP: surrogates 0xd83d, 0xde00 -> 0xd83d*31 + 0xde00
    ("Hello, World!", 1498789909),
])
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_hash_matches_the_definition() -> None:
    text = "The quick brown fox jumps over the lazy dog"
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) % 2**32
    assert java_string_hashcode(text) == (h - 2**32 if h >= 2**31 else h)
    assert -(2**31) <= java_string_hashcode(text * 100) < 2**31


def test_default_partition() -> None:
    assert default_partition("hello", 7) == 99162322 % 7
    assert default_partition("a", 1) == 0
    # "user-42".hashCode() == -147182656 (checked on a JVM): abs() first, like Scala.
    assert java_string_hashcode("user-42") == -147182656
    assert default_partition("user-42", 10) == 6
    # Int.MinValue: Scala would throw; we use 2**31 % n.
    assert default_partition("polygenelubricants", 7) == 2**31 % 7
    assert default_partition("polygenelubricants", 2) == 0


def test_bytes_keys_hash_like_their_utf8_text() -> None:
    assert default_partition(b"key-1", 13) == default_partition("key-1", 13)
    text = "caf\u00e9"
    assert default_partition(text.encode(), 5) == default_partition(text, 5)
    assert default_partition(b"\xff", 5) == default_partition("\ufffd", 5)


def test_default_partition_rejects_no_partitions() -> None:
    with pytest.raises(LocalProtocolError):
        default_partition("k", 0)
