"""How a batch of messages becomes bytes for a sink: ``raw``, ``lines``, ``jsonl``, ``binary``.

One encoder call per *batch*, never per message: every encoder builds a list and does a single
``bytes.join``, because the daemon's throughput target (hundreds of thousands of messages a
second) leaves no room for a ``write`` per message.

Formats (the same bytes for ``--output`` files and for an ``--exec`` child's stdin):

* ``raw``    -- the values concatenated, nothing between them (a byte-exact dump);
* ``lines``  -- each value followed by ``\\n`` (values must not contain newlines to be split
  back; the daemon does not check, it is the operator's choice);
* ``jsonl``  -- one JSON object per line:
  ``{"topic":"t","partition":"0-1","offset":120,"next_offset":230,"value":"..."}`` where
  ``offset`` is the message's own byte position as the consumer reports it and
  ``next_offset`` the offset a commit after it writes.  With ``value_encoding="utf-8"`` a value
  that is not valid UTF-8 is written as ``"value_base64":"..."`` instead of ``"value"``
  (never mangled); with ``"base64"`` every ``"value"`` holds the base64 text of the bytes.
* ``binary`` -- each value as a big-endian int32 length followed by the bytes.

Invariant: the output of one batch is exactly the concatenation of the outputs of each of its
messages encoded alone (so a batch can be split anywhere and re-sent, e.g. after a child
restart, without changing the stream a reader sees).
"""

from __future__ import annotations

import binascii
import json
import re
import struct
from collections.abc import Iterable, Sequence
from itertools import chain, repeat
from typing import Protocol

from zkconsumer.consumer import PartitionRun

__all__ = [
    "EXEC_FORMATS",
    "FORMATS",
    "OUTPUT_FORMATS",
    "VALUE_ENCODINGS",
    "BatchEncoder",
    "MessageLike",
    "encoder_for",
]

FORMATS = ("raw", "lines", "jsonl", "binary")
OUTPUT_FORMATS = ("raw", "lines", "jsonl")
EXEC_FORMATS = ("lines", "jsonl", "binary")
VALUE_ENCODINGS = ("utf-8", "base64")


class MessageLike(Protocol):
    """What the daemon needs of a consumed message (`zkconsumer.consumer.Message` fits)."""

    @property
    def topic(self) -> str: ...
    @property
    def broker_id(self) -> int: ...
    @property
    def partition_id(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def next_offset(self) -> int: ...
    @property
    def value(self) -> bytes: ...
    @property
    def claim(self) -> int: ...


class BatchEncoder(Protocol):
    """A format's encoder: the same bytes from `Message`-like objects or from whole runs."""

    def __call__(self, batch: Sequence[MessageLike]) -> bytes:
        """Encode messages (the per-message path)."""
        ...

    def runs(self, runs: Sequence[PartitionRun]) -> bytes:
        """Encode runs of the consumer's batch path, without an object per message."""
        ...


_LEN = struct.Struct(">i")  # int32 BE length prefix of the binary format
# JSON strings may hold raw UTF-8, but '"', '\' and C0 controls must be escaped.
_NEEDS_ESCAPE = re.compile(rb'["\\\x00-\x1f]')
_b64 = binascii.b2a_base64


class _Raw:
    def __call__(self, batch: Sequence[MessageLike]) -> bytes:
        return b"".join([m.value for m in batch])

    def runs(self, runs: Sequence[PartitionRun]) -> bytes:
        return b"".join([run.payload_view() for run in runs])


class _ValuesEncoder:
    """A format that depends on the payloads only: both paths gather them, one encodes."""

    def __call__(self, batch: Sequence[MessageLike]) -> bytes:
        return self.encode_values([m.value for m in batch])

    def runs(self, runs: Sequence[PartitionRun]) -> bytes:
        values: list[bytes] = []
        for run in runs:
            values.extend(run.values())
        return self.encode_values(values)

    def encode_values(self, values: list[bytes]) -> bytes:
        raise NotImplementedError


class _Lines(_ValuesEncoder):
    def encode_values(self, values: list[bytes]) -> bytes:
        return b"\n".join(values) + b"\n" if values else b""


class _Binary(_ValuesEncoder):
    def encode_values(self, values: list[bytes]) -> bytes:
        parts: list[bytes] = []
        append = parts.append
        pack = _LEN.pack
        for v in values:
            append(pack(len(v)))
            append(v)
        return b"".join(parts)


class _Jsonl:
    """jsonl with a cached per-partition prefix, so a message costs one %-format.

    Both paths feed one loop with ``(prefix, offset, next_offset, value)`` rows: messages
    look their prefix up each, a run once for all of its rows.
    """

    def __init__(self, value_encoding: str) -> None:
        self._base64 = value_encoding == "base64"
        self._prefixes: dict[tuple[str, int, int], bytes] = {}

    def _prefix(self, topic: str, broker_id: int, partition_id: int) -> bytes:
        key = (topic, broker_id, partition_id)
        prefix = self._prefixes.get(key)
        if prefix is None:
            text = (f'{{"topic":{json.dumps(topic)},"partition":"{broker_id}-{partition_id}",'
                    '"offset":')
            prefix = self._prefixes[key] = text.encode()
        return prefix

    def __call__(self, batch: Sequence[MessageLike]) -> bytes:
        prefix = self._prefix
        return self._encode((prefix(m.topic, m.broker_id, m.partition_id), m.offset,
                             m.next_offset, m.value) for m in batch)

    def runs(self, runs: Sequence[PartitionRun]) -> bytes:
        return self._encode(chain.from_iterable(
            zip(repeat(self._prefix(run.topic, run.broker_id, run.partition_id)),
                run.offsets, run.next_offsets, run.values()) for run in runs))

    def _encode(self, rows: Iterable[tuple[bytes, int, int, bytes]]) -> bytes:
        parts: list[bytes] = []
        append = parts.append
        if self._base64:
            for prefix, offset, next_offset, v in rows:
                append(b'%s%d,"next_offset":%d,"value":"%s"}\n' % (
                    prefix, offset, next_offset, _b64(v, newline=False)))
            return b"".join(parts)
        needs_escape = _NEEDS_ESCAPE.search
        for prefix, offset, next_offset, v in rows:
            if v.isascii() and needs_escape(v) is None:
                append(b'%s%d,"next_offset":%d,"value":"%s"}\n' % (
                    prefix, offset, next_offset, v))
                continue
            try:
                text = json.dumps(v.decode("utf-8"), ensure_ascii=False).encode("utf-8")
            except UnicodeDecodeError:
                append(b'%s%d,"next_offset":%d,"value_base64":"%s"}\n' % (
                    prefix, offset, next_offset, _b64(v, newline=False)))
                continue
            append(b'%s%d,"next_offset":%d,"value":%s}\n' % (
                prefix, offset, next_offset, text))
        return b"".join(parts)


def encoder_for(fmt: str, value_encoding: str = "utf-8") -> BatchEncoder:
    """The batch encoder of format ``fmt`` (one of `FORMATS`).

    Raises ``ValueError`` on an unknown name; configuration code validates names earlier and
    turns that into a `ConfigurationError`.
    """
    if value_encoding not in VALUE_ENCODINGS:
        raise ValueError(f"unknown value encoding {value_encoding!r}")
    if fmt == "raw":
        return _Raw()
    if fmt == "lines":
        return _Lines()
    if fmt == "binary":
        return _Binary()
    if fmt == "jsonl":
        return _Jsonl(value_encoding)
    raise ValueError(f"unknown format {fmt!r}")
