"""A reader for Java ``.properties`` files, as ``java.util.Properties.load`` parses them.

Job: turn the text of a Kafka 0.7 ``server.properties`` into a ``dict[str, str]`` so the dev
broker accepts the very file an operator already has.

What it honours (the subset of the Java grammar real Kafka configs use, done correctly):

* comment lines starting with ``#`` or ``!`` (after leading whitespace), blank lines;
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around the
  separator is skipped (``key = value``, ``key:value``, ``key value``);
* a line ending in an odd number of backslashes continues on the next line, whose leading
  whitespace is dropped;
* escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\x`` -> ``x`` for any other character.

Invariant: a later occurrence of a key replaces an earlier one (Java's ``Hashtable.put``).
"""

from __future__ import annotations

from pathlib import Path

from zkconsumer.errors import ConfigurationError

__all__ = ["load_properties", "parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines; drop comments and blank lines."""
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(_WS) if pending is not None else raw
        if pending is None:
            stripped = line.lstrip(_WS)
            if not stripped or stripped[0] in "#!":
                continue
            line = stripped
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # odd: the last backslash escapes the newline
            pending = (pending or "") + line[:-1]
            continue
        out.append((pending or "") + line)
        pending = None
    if pending is not None:
        out.append(pending)
    return out


def _unescape(s: str, where: str) -> str:
    res: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            res.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            hexdigits = s[i + 2:i + 6]
            try:
                res.append(chr(int(hexdigits, 16)))
            except ValueError as exc:
                raise ConfigurationError(f"{where}: malformed \\uXXXX escape") from exc
            i += 6
            continue
        res.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(res)


def _split(line: str) -> tuple[str, str]:
    """Split a logical line into its raw (still escaped) key and value."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WS:
            break
        i += 1
    key = line[:i]
    j = i
    while j < len(line) and line[j] in _WS:
        j += 1
    if j < len(line) and line[j] in "=:":
        j += 1
        while j < len(line) and line[j] in _WS:
            j += 1
    return key, line[j:]


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse ``.properties`` text into an ordered ``{key: value}`` mapping."""
    props: dict[str, str] = {}
    for n, line in enumerate(_logical_lines(text), start=1):
        raw_key, raw_value = _split(line)
        where = f"{source}: entry {n}"
        props[_unescape(raw_key, where)] = _unescape(raw_value, where)
    return props


def load_properties(path: str | Path) -> dict[str, str]:
    """Read a ``.properties`` file (ISO-8859-1 like Java, but UTF-8 is tried first)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read properties file {p}: {exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse_properties(text, str(p))
