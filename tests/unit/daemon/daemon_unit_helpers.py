"""Helpers for the daemon unit tests: real `Message` objects with 0.7 byte offsets."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from zkconsumer.consumer.message import Message, PartitionState


def make_messages(n: int, *, topic: str = "t", broker: int = 0, partition: int = 0,
                  start: int = 0, prefix: str = "m") -> list[Message]:
    """``n`` consecutive uncompressed messages with 0.7 byte offsets (10-byte headers).

    Every call is a new *claim* of the partition (its own `PartitionState`, as the consumer
    creates one per claim): messages made after an `AckTracker.revoke` belong to a new
    claim, those made before to a revoked one.
    """
    state = PartitionState(topic, broker, partition, f"{topic}-thread-0", start, start, 1024)
    out = []
    offset = start
    for i in range(n):
        value = f"{prefix}{i}".encode()
        nxt = offset + 10 + len(value)
        out.append(Message(topic, broker, partition, offset, nxt, value, state))
        offset = nxt
    return out


def python_command(tmp_path: Path, name: str, source: str) -> str:
    """Write ``source`` to a script and return a shell command that runs it."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    return f"'{sys.executable}' -u '{script}'"
