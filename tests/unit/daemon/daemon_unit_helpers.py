"""Helpers for the daemon unit tests: real `Message` objects with 0.7 byte offsets."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from zkconsumer.consumer.message import Message


def make_messages(n: int, *, topic: str = "t", broker: int = 0, partition: int = 0,
                  start: int = 0, prefix: str = "m") -> list[Message]:
    """``n`` consecutive uncompressed messages with 0.7 byte offsets (10-byte headers)."""
    out = []
    offset = start
    for i in range(n):
        value = f"{prefix}{i}".encode()
        nxt = offset + 10 + len(value)
        out.append(Message(topic, broker, partition, offset, nxt, value))
        offset = nxt
    return out


def python_command(tmp_path: Path, name: str, source: str) -> str:
    """Write ``source`` to a script and return a shell command that runs it."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    return f"'{sys.executable}' -u '{script}'"
