"""Read Java ``.properties`` files the way ``java.util.Properties.load`` does.

Kafka 0.7 tools take their configuration as ``.properties`` files (``consumer.properties``,
``server.properties``), and operators migrating a deployment hand us those very files, so the
parser follows the Java rules rather than a simplified ``key=value`` split:

* a *logical* line may span several natural lines: a line ending in an odd number of
  backslashes continues on the next, whose leading whitespace is dropped;
* a line whose first non-blank character is ``#`` or ``!`` is a comment (only at the start of a
  logical line -- a continued value may start with ``#``);
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around one
  separator is skipped, so ``k=v``, ``k: v``, ``k v`` and ``k = v`` are all the same;
* escapes ``\\t \\n \\r \\f \\uXXXX`` are decoded, any other ``\\c`` is ``c``;
* a later duplicate key wins (Java's ``Hashtable.put``).

Invariant: `parse_properties` never raises on odd input (Java does not either, except for a
malformed ``\\uXXXX``, which we reject with `ConfigurationError` naming the line).

Encoding: Java reads the bytes as ISO-8859-1.  We decode UTF-8 when the file is valid UTF-8
(what editors write today) and fall back to ISO-8859-1 otherwise; for the ASCII content of
real Kafka configs both give the same result.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from zkconsumer.errors import ConfigurationError

__all__ = ["load_properties", "parse_properties", "parse_settings"]

_WHITESPACE = " \t\f"
_SEPARATORS = "=:"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read a Java ``.properties`` file into an ordered ``{key: value}`` dict.

    Raises `ConfigurationError` if the file cannot be read (the message names the path).
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ConfigurationError(f"cannot read properties file {os.fspath(path)!r}: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("iso-8859-1")
    return parse_properties(text)


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a ``.properties`` file (see the module docstring for the rules)."""
    result: dict[str, str] = {}
    for lineno, logical in _logical_lines(text):
        key, value = _split_key_value(logical, lineno)
        result[key] = value
    return result


def parse_settings(items: Iterable[str], flag: str = "--set") -> dict[str, str]:
    """``["key=value", ...]`` from repeated command-line flags -> an ordered dict.

    The command-line counterpart of a properties file: every command that takes ``--set``
    overrides reads it here, so the syntax and the error are the same everywhere.  A later
    duplicate key wins, as in a file.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"{flag} {item!r}: expected key=value")
        out[key.strip()] = value.strip()
    return out


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """Yield ``(first line number, logical line)`` with continuations joined, comments dropped.

    The continuation backslash is kept out of the joined text; escapes are *not* decoded yet,
    because whether a ``=`` separates key from value depends on it being unescaped.
    """
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while _continues(line):
            parts.append(line[:-1])
            if i >= len(lines):
                line = ""
                break
            line = lines[i].lstrip(_WHITESPACE)
            i += 1
        parts.append(line)
        yield start + 1, "".join(parts)


def _continues(line: str) -> bool:
    """True if ``line`` ends in an odd number of backslashes (an escaped line break)."""
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split_key_value(line: str, lineno: int) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in _SEPARATORS or c in _WHITESPACE:
            break
        i += 1
    key_raw = line[:i]
    # Skip whitespace, at most one separator, then whitespace again.
    while i < n and line[i] in _WHITESPACE:
        i += 1
    if i < n and line[i] in _SEPARATORS:
        i += 1
        while i < n and line[i] in _WHITESPACE:
            i += 1
    return _unescape(key_raw, lineno), _unescape(line[i:], lineno)


def _unescape(s: str, lineno: int) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:  # a lone trailing backslash (end of file after a continuation)
            i += 1
            continue
        e = s[i + 1]
        if e == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ConfigurationError(
                    f"malformed \\uxxxx escape on line {lineno} of properties: {s!r}"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(e, e))
        i += 2
    return "".join(out)
