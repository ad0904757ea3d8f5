"""Read a Kafka 0.7 broker's log directory straight from disk (no broker needed).

Job: find the partitions and segment files under a ``log.dir`` and yield every message with
its partition byte offset, exactly as a consumer fetching from that broker would have seen it.
This is how the data of a dead broker (or a copied-away disk) gets migrated.

The names of directories and segment files are `zkconsumer.protocol.logformat`'s (shared with
the dev broker).  It lives in the client layer because it is the other way to read a broker's
messages -- from its disk instead of its socket -- and both `zkconsumer.migrate` (``zkconsumer
logdir``) and `zkconsumer.spark` (the export) build on it.

Invariants
    * Messages come from the codec's `decode_message_set` (deep: wrappers are decompressed,
      every CRC is verified, inner messages get the reference offsets of REFERENCE §4.5), so
      offsets and payloads are byte-for-byte what a 0.7 fetch returns.
    * Memory is bounded: a segment is read in chunks of ``chunk_size`` bytes (plus one message
      when a single message is bigger), never whole.
    * A message cut short at the end of the LAST segment of a partition is a *torn tail* -- what
      a broker crash between ``write`` and ``flush`` leaves, and what the 0.7 broker itself
      truncates away at recovery.  It is reported (`ReadIssue` kind ``torn-tail``) and reading
      stops there; it is not an error.  The same in any other segment is corruption.
    * Corruption raises `CorruptSegmentError` naming the file, the position in the file and the
      partition offset -- or, with ``on_corrupt="skip"``, is reported as a `ReadIssue` and
      reading resumes at the next segment (everything after the bad byte in that file is lost:
      0.7 has no resynchronisation marker).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from zkconsumer.errors import ConfigurationError, CorruptSegmentError, DecodeError
from zkconsumer.protocol import DEFAULT_MAX_INFLATED, decode_message_set
from zkconsumer.protocol.logformat import MAX_MESSAGE_SIZE, parse_partition_dir, parse_segment_name

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "PartitionLog",
    "ReadIssue",
    "ReadStats",
    "Segment",
    "discover",
    "iter_partition",
    "iter_partition_chunks",
    "iter_segment_chunks",
    "scan_partition",
]

log = logging.getLogger(__name__)

#: Bytes read from a segment per step (the decoded messages of one chunk are yielded together).
DEFAULT_CHUNK_SIZE = 4 * 1024 * 1024
_LENGTH = struct.Struct(">i")

OnCorrupt = Literal["raise", "skip"]
Message = tuple[int, int, bytes]  # (offset, next_offset, payload), as the codec returns them


@dataclass(frozen=True)
class Segment:
    """One ``.kafka`` file: where it starts in the partition and how many bytes it holds."""

    path: str
    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass(frozen=True)
class PartitionLog:
    """One ``<topic>-<partition>`` directory and its segments, sorted by start offset."""

    topic: str
    partition: int
    path: str
    segments: tuple[Segment, ...]

    @property
    def start(self) -> int:
        """First byte offset on disk (segments before it were deleted by retention)."""
        return self.segments[0].start if self.segments else 0

    @property
    def end(self) -> int:
        """Offset just past the last byte on disk (a torn tail included)."""
        return self.segments[-1].end if self.segments else 0

    @property
    def size(self) -> int:
        return sum(s.size for s in self.segments)

    def gaps(self) -> list[tuple[int, int]]:
        """``(expected, found)`` for each segment that does not start where the previous ends.

        A healthy 0.7 log is contiguous: a new segment starts at the old one's end.
        """
        return [(a.end, b.start) for a, b in zip(self.segments, self.segments[1:], strict=False)
                if a.end != b.start]


def scan_partition(path: str, topic: str, partition: int) -> PartitionLog:
    """List the segments of one partition directory (other files are ignored)."""
    segments = []
    with os.scandir(path) as entries:
        for entry in entries:
            start = parse_segment_name(entry.name)
            if start is not None and entry.is_file():
                segments.append(Segment(entry.path, start, entry.stat().st_size))
    segments.sort(key=lambda s: s.start)
    return PartitionLog(topic, partition, path, tuple(segments))


def discover(log_dir: str, *, topics: Iterable[str] | None = None,
             partition: int | None = None) -> list[PartitionLog]:
    """Every partition directory under ``log_dir``, sorted by (topic, partition).

    ``topics`` keeps only those topics; ``partition`` only that partition number.  A missing
    ``log_dir`` is a `ConfigurationError` (the operator mistyped it), an empty one gives [].
    """
    if not os.path.isdir(log_dir):
        raise ConfigurationError(f"log directory {log_dir!r} does not exist or is not a directory")
    wanted = set(topics) if topics is not None else None
    found = []
    with os.scandir(log_dir) as entries:
        for entry in entries:
            parsed = parse_partition_dir(entry.name)
            if parsed is None or not entry.is_dir():
                continue
            topic, part = parsed
            if wanted is not None and topic not in wanted:
                continue
            if partition is not None and part != partition:
                continue
            found.append(scan_partition(entry.path, topic, part))
    found.sort(key=lambda p: (p.topic, p.partition))
    return found


class ReadIssue(NamedTuple):
    """Something a reader stepped over instead of raising: a torn tail or skipped corruption."""

    kind: str  # "torn-tail" | "corrupt" | "gap" (bytes missing between two segments)
    path: str
    position: int  # byte position in the file
    offset: int  # partition byte offset (segment start + position)
    detail: str


@dataclass
class ReadStats:
    """Counters a read fills in as it goes (pass one in to get them)."""

    messages: int = 0
    #: Shallow bytes consumed (whole messages as stored on disk).
    bytes: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    #: Offset after the last whole shallow message read: where a consumer would continue.
    next_offset: int | None = None
    issues: list[ReadIssue] = field(default_factory=list)

    def add(self, messages: list[Message]) -> None:
        if not messages:
            return
        self.messages += len(messages)
        if self.first_offset is None:
            self.first_offset = messages[0][0]
        self.last_offset = messages[-1][0]


def _corrupt(segment: Segment, position: int, message: str) -> CorruptSegmentError:
    return CorruptSegmentError(message, path=segment.path, position=position,
                               offset=segment.start + position)


def iter_segment_chunks(segment: Segment, *, start: int | None = None, end: int | None = None,
                        last: bool = True, chunk_size: int = DEFAULT_CHUNK_SIZE,
                        max_inflated: int = DEFAULT_MAX_INFLATED,
                        on_corrupt: OnCorrupt = "raise",
                        stats: ReadStats | None = None) -> Iterator[list[Message]]:
    """Yield the messages of one segment file, one non-empty list per chunk read.

    ``start``/``end`` are partition offsets: reading begins at ``start`` (which must be a
    message boundary) and yields only messages whose shallow entry starts before ``end`` (a
    compressed wrapper belongs to the range where it starts).  ``last`` says whether this is
    the partition's last segment, the only one where a partial message is a torn tail.
    """
    if chunk_size < 16:
        raise ConfigurationError(f"chunk_size must be at least 16, got {chunk_size}")
    stats = stats if stats is not None else ReadStats()
    size = os.path.getsize(segment.path)  # the file may have grown since discovery
    pos = 0 if start is None else start - segment.start
    if pos < 0 or pos > size:
        raise ConfigurationError(
            f"start offset {start} is outside segment {segment.path} "
            f"[{segment.start}, {segment.start + size}]")
    limit = size if end is None else min(size, end - segment.start)
    want = chunk_size
    with open(segment.path, "rb", buffering=0) as fh:
        while pos < limit:
            fh.seek(pos)
            buf = fh.read(min(want, size - pos))
            base = segment.start + pos
            try:
                decoded = decode_message_set(buf, base, max_inflated=max_inflated)
            except DecodeError as exc:
                where = (exc.offset - segment.start) if exc.offset is not None else pos
                # The whole messages before the bad one are good data: hand them out first.
                good = decode_message_set(buf[:where - pos], base, max_inflated=max_inflated)
                head = [m for m in good.messages if end is None or m[0] < end]
                if head:
                    stats.add(head)
                    yield head
                stats.bytes += good.valid_bytes
                stats.next_offset = base + good.valid_bytes
                err = _corrupt(segment, where, f"{type(exc).__name__}: {_bare(exc)}")
                if on_corrupt == "raise":
                    raise err from exc
                _skip(stats, segment, where, str(exc))
                return
            messages = decoded.messages
            if end is not None and messages and messages[-1][0] >= end:
                messages = [m for m in messages if m[0] < end]
            if messages:
                stats.add(messages)
                yield messages
            if decoded.valid_bytes:
                pos += decoded.valid_bytes
                stats.bytes += decoded.valid_bytes
                stats.next_offset = segment.start + pos
                want = chunk_size
                continue
            # Not one whole message in the buffer: either the message is bigger than the
            # chunk (read it whole next round) or the file ends inside it.
            remaining = size - pos
            length = _LENGTH.unpack_from(buf, 0)[0] if len(buf) >= 4 else None
            if length is not None and (length < 5 or length > MAX_MESSAGE_SIZE):
                err = _corrupt(segment, pos, f"invalid message length {length}")
                if on_corrupt == "raise":
                    raise err
                _skip(stats, segment, pos, str(err))
                return
            if length is not None and 4 + length <= remaining:
                want = 4 + length
                continue
            detail = (f"{remaining} trailing bytes"
                      + (f" of a {4 + length}-byte message" if length is not None else ""))
            if last:
                log.warning("torn tail in %s at position %d: %s", segment.path, pos, detail)
                stats.issues.append(
                    ReadIssue("torn-tail", segment.path, pos, segment.start + pos, detail))
                return
            err = _corrupt(segment, pos, f"segment ends inside a message ({detail}) "
                                         "but it is not the last segment")
            if on_corrupt == "raise":
                raise err
            _skip(stats, segment, pos, str(err))
            return


def _bare(exc: DecodeError) -> str:
    """The codec's message without its own "(at byte offset N)" suffix (we add file + offset)."""
    text = str(exc)
    suffix = f" (at byte offset {exc.offset})"
    return text[: -len(suffix)] if text.endswith(suffix) else text


def _skip(stats: ReadStats, segment: Segment, position: int, detail: str) -> None:
    log.error("skipping the rest of %s from position %d: %s", segment.path, position, detail)
    stats.issues.append(
        ReadIssue("corrupt", segment.path, position, segment.start + position, detail))


def iter_partition_chunks(plog: PartitionLog, *, start: int | None = None,
                          end: int | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                          max_inflated: int = DEFAULT_MAX_INFLATED,
                          on_corrupt: OnCorrupt = "raise",
                          stats: ReadStats | None = None) -> Iterator[list[Message]]:
    """Chunks of messages of a whole partition (all segments in order), see iter_segment_chunks."""
    segments = plog.segments
    for i, seg in enumerate(segments):
        if end is not None and seg.start >= end:
            break
        if start is not None and start >= seg.end and i < len(segments) - 1:
            continue
        prev = segments[i - 1].end if i else None
        if prev is not None and prev != seg.start and (start is None or start < seg.start):
            # A missing or truncated segment: those bytes are gone; say so, never silently.
            detail = f"segment starts at {seg.start} but the previous one ends at {prev}"
            log.warning("gap in %s: %s", plog.path, detail)
            if stats is not None:
                stats.issues.append(ReadIssue("gap", seg.path, 0, seg.start, detail))
        seg_start = start if start is not None and seg.start <= start else None
        yield from iter_segment_chunks(
            seg, start=seg_start, end=end, last=i == len(segments) - 1, chunk_size=chunk_size,
            max_inflated=max_inflated, on_corrupt=on_corrupt, stats=stats)


def iter_partition(plog: PartitionLog, *, start: int | None = None, end: int | None = None,
                   on_corrupt: OnCorrupt = "raise",
                   stats: ReadStats | None = None) -> Iterator[Message]:
    """Every message ``(offset, next_offset, payload)`` of a partition, in log order."""
    for chunk in iter_partition_chunks(plog, start=start, end=end, on_corrupt=on_corrupt,
                                       stats=stats):
        yield from chunk
