"""The Kafka 0.7 on-disk log format: how a broker's ``log.dir`` names partitions and segments.

Job: the one definition of the names, shared by the dev broker that writes them
(`zkconsumer.broker.log`, `zkconsumer.broker.manager`) and the log-directory reader that reads
them (`zkconsumer.client.logdir`, used by ``zkconsumer logdir`` and the Spark export).  Pure:
names in, names out -- no file is touched here (the protocol layer is sans-I/O).

Layout (log/Log.scala, log/LogManager.scala)::

    <log.dir>/<topic>-<partition>/<20-digit start byte offset>.kafka

Invariants
    * A partition directory name is split at its LAST ``-`` (topics may contain ``-``; the
      broker does the same with ``lastIndexOf``); the partition is ASCII digits.
    * A segment's name is the partition byte offset of its first byte, so a message at file
      position ``pos`` of segment ``S`` has offset ``S + pos``.  The broker writes 20 digits
      (Log.nameFromOffset); it reads any run of digits before ``.kafka`` (Log.loadSegments
      parses the stem with ``toLong``), and so does `parse_segment_name`.
    * No message stored on disk is longer than `MAX_MESSAGE_SIZE`: a 0.7 broker refuses
      requests above ``max.socket.request.bytes`` (100 MiB).
"""

from __future__ import annotations

import re

__all__ = [
    "MAX_MESSAGE_SIZE",
    "SEGMENT_SUFFIX",
    "parse_partition_dir",
    "parse_segment_name",
    "partition_dir",
    "segment_name",
]

SEGMENT_SUFFIX = ".kafka"
#: A length prefix above this cannot be a real message (module docstring).
MAX_MESSAGE_SIZE = 104857600

_SEGMENT_RE = re.compile(r"([0-9]+)\.kafka")
_DIGITS = re.compile(r"[0-9]+")


def segment_name(start: int) -> str:
    """The file name the 0.7 broker gives the segment starting at ``start`` (Log.nameFromOffset)."""
    return f"{start:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """Start byte offset of a segment file name (``00000000000000001234.kafka`` -> 1234)."""
    match = _SEGMENT_RE.fullmatch(name)
    return int(match.group(1)) if match else None


def partition_dir(topic: str, partition: int) -> str:
    """``<topic>-<partition>``: the directory of one partition's segments."""
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``"my-topic-3"`` -> ``("my-topic", 3)``; None if it is not a partition directory."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not _DIGITS.fullmatch(part):
        return None
    return topic, int(part)
