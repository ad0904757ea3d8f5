"""One partition's on-disk log, laid out and behaving like Kafka 0.7.2's ``log/Log.scala``.

Layout: ``<log.dir>/<topic>-<partition>/`` holds segment files named by their 20-digit,
zero-padded start *byte* offset plus ``.kafka`` (``00000000000000000000.kafka``); a segment's
content is raw message-set bytes.  A real 0.7 broker can read what this writes and vice versa.

Invariants (each one is something a 0.7 client can observe)
    * **Flushed-only visibility.**  Appends go to the file at once, but fetch and offsets see
      a partition only up to its *high-water mark*, the flushed end (FileMessageSet.flush sets
      it).  A flush happens when ``log.flush.interval`` messages are unflushed, or from the
      manager's timer.  Both count *deep* messages, and a flush with zero unflushed messages is
      a no-op -- which is why a gzip wrapper around an empty set stays invisible until the
      next normal append (REFERENCE §4.8).
    * **Rolling.** Before an append, if the active segment already exceeds ``log.file.size``
      (or is older than ``log.roll.hours``), a new segment starts at the current end; so a
      segment may exceed the size by one set, and one set larger than a segment is written
      whole.  Rolling flushes the old segment, so every segment but the last is fully visible.
    * **A read never crosses a segment boundary**: bytes = min(maxSize, segment's visible end
      - offset) (Log.read + FileMessageSet.read).  Misaligned offsets are not checked.
    * **Recovery keeps what it cuts.**  Like 0.7.2, loading truncates the last segment at
      its first torn or corrupt entry; unlike it, the cut bytes are first copied to
      ``<segment>.kafka.truncated-<position>`` in the partition directory (see `_save_cut`).
    * Segments are contiguous (start of next = start + size of previous); a directory that
      violates this refuses to load, like Log.validateSegments.
    * Readers never take the lock: they read an immutable tuple of segments plus ints that are
      only ever replaced whole.  File bytes below a segment's size never change, so a region
      handed out for ``sendfile`` stays valid while more is appended.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from zkconsumer.errors import BrokerStartupError, DecodeError, OffsetOutOfRangeError
from zkconsumer.protocol.constants import EARLIEST_TIME, LATEST_TIME
from zkconsumer.protocol.logformat import SEGMENT_SUFFIX, parse_segment_name, segment_name
from zkconsumer.protocol.message import read_shallow

__all__ = [
    "FetchRegion",
    "LogSettings",
    "PartitionLog",
    "Segment",
    "recover_file",
]

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")
_RECOVERY_CHUNK = 8 * 1024 * 1024


def _start_of(segment: Segment) -> int:
    return segment.start


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class FetchRegion(NamedTuple):
    """Bytes a fetch answers with: ``length`` bytes of ``fd`` from ``position``.

    ``fd`` is -1 for an empty answer.  ``length`` can be negative (a negative maxSize), which
    the server turns into what the reference does with it (see server.py).
    """

    fd: int
    position: int
    length: int


EMPTY_REGION = FetchRegion(-1, 0, 0)


@dataclass(frozen=True)
class LogSettings:
    """The per-topic knobs a PartitionLog needs (resolved from BrokerConfig by the manager)."""

    segment_size: int
    flush_interval: int
    roll_ms: int
    fsync: bool = False


class Segment:
    """One ``.kafka`` file.  ``size`` = bytes written; ``hwm`` = bytes flushed (visible)."""

    __slots__ = ("fd", "first_append_ms", "hwm", "path", "size", "start")

    def __init__(self, path: Path, start: int, fd: int, size: int) -> None:
        self.path = path
        self.start = start
        self.fd = fd
        self.size = size
        self.hwm = size
        self.first_append_ms: int | None = None

    @property
    def end(self) -> int:
        """The visible end offset of this segment."""
        return self.start + self.hwm

    def mtime_ms(self) -> int:
        """File.lastModified: used by the offsets-before-time lookup."""
        try:
            return os.stat(self.path).st_mtime_ns // 1_000_000
        except OSError:
            return 0

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, size={self.size}, hwm={self.hwm})"


def recover_file(fd: int, length: int) -> int:
    """Bytes of whole, CRC-valid messages from the start of a segment (FileMessageSet.recover).

    Stops at the first entry that is partial, too short, of unknown magic or whose CRC fails;
    everything after it is a torn or corrupt tail.  Reads in chunks, never the whole file.
    """
    pos = 0
    while pos < length:
        chunk = os.pread(fd, min(_RECOVERY_CHUNK, length - pos), pos)
        progressed = _whole_prefix(chunk)
        if progressed < 0:
            return pos + (-progressed - 1)
        if progressed == 0:  # the next message is larger than a chunk: read exactly it
            if len(chunk) < 4:
                return pos
            (n,) = _INT32.unpack_from(chunk, 0)
            if n < 5 or pos + 4 + n > length:
                return pos
            progressed = _whole_prefix(os.pread(fd, 4 + n, pos))
            if progressed <= 0:
                return pos
        pos += progressed
    return pos


def _whole_prefix(buf: bytes) -> int:
    """Length of the valid prefix of ``buf``; ``-(n+1)`` if corruption was found at ``n``."""
    pos, size = 0, len(buf)
    try:
        while True:
            entry = read_shallow(buf, pos, size, 0)
            if entry is None:
                return pos
            pos = entry[0]
    except DecodeError:
        return -(pos + 1)


class PartitionLog:
    """The segments of one ``<topic>-<partition>`` directory.  Thread-safe."""

    def __init__(self, directory: Path, topic: str, partition: int, settings: LogSettings, *,
                 recover: bool = True, clock_ms: Callable[[], int] = _wall_ms) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.settings = settings
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._unflushed = 0
        self.last_flushed_ms = clock_ms()
        self._closed = False
        self._segments: tuple[Segment, ...] = self._load(recover)

    # --------------------------------------------------------------------- loading
    def _load(self, recover: bool) -> tuple[Segment, ...]:
        found: list[tuple[int, Path]] = []
        for entry in self.dir.iterdir():
            start = parse_segment_name(entry.name)
            if entry.is_file() and start is not None:
                found.append((start, entry))
            elif entry.name.endswith(SEGMENT_SUFFIX):
                log.warning("ignoring %s: not a segment name", entry)
        if not found:
            path = self.dir / segment_name(0)
            return (Segment(path, 0, self._open(path, mutable=True), 0),)
        found.sort()
        segments: list[Segment] = []
        for i, (start, path) in enumerate(found):
            mutable = i == len(found) - 1
            fd = self._open(path, mutable=mutable)
            segments.append(Segment(path, start, fd, os.fstat(fd).st_size))
        for prev, nxt in itertools.pairwise(segments):
            if prev.start + prev.size != nxt.start:
                for s in segments:
                    os.close(s.fd)
                raise BrokerStartupError(
                    f"the following segments don't validate: {prev.path}, {nxt.path} "
                    f"({prev.start} + {prev.size} != {nxt.start})")
        last = segments[-1]
        if recover:
            valid = recover_file(last.fd, last.size)
            if valid < last.size:
                side = self._save_cut(last, valid)
                log.warning("recovery of %s: truncated %d bytes of torn or corrupt tail at "
                            "position %d; the cut bytes (with any valid messages behind the "
                            "damage) are kept in %s", last.path, last.size - valid, valid,
                            side)
                os.ftruncate(last.fd, valid)
                last.size = last.hwm = valid
        return tuple(segments)

    def _save_cut(self, segment: Segment, position: int) -> Path:
        """Copy ``segment``'s bytes from ``position`` to a side file before recovery cuts them.

        0.7.2 truncates a segment at the first bad entry, which also destroys every valid
        message behind a mid-file corruption.  The log still ends where 0.7 would end it (a
        0.7 client sees exactly the reference behaviour), but the bytes survive for an
        operator to inspect or salvage (``<segment>.kafka.truncated-<position>``: a name the
        0.7 loader, this loader and ``zkconsumer logdir`` all ignore, since it does not end
        in ``.kafka``).  Written and synced before the truncation, so a crash in between
        only repeats the recovery (into a new side file), never loses the bytes.
        """
        base = segment.path.with_name(f"{segment.path.name}.truncated-{position}")
        for n in itertools.count():
            side = base if n == 0 else base.with_name(f"{base.name}.{n}")
            try:
                fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                             | getattr(os, "O_CLOEXEC", 0), 0o644)
            except FileExistsError:
                continue
            break
        try:
            pos, end = position, segment.size
            while pos < end:
                chunk = os.pread(segment.fd, min(_RECOVERY_CHUNK, end - pos), pos)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view):]
                pos += len(chunk)
            os.fsync(fd)
        finally:
            os.close(fd)
        return side

    @staticmethod
    def _open(path: Path, *, mutable: bool) -> int:
        flags = (os.O_RDWR | os.O_CREAT | os.O_APPEND) if mutable else os.O_RDONLY
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)

    # --------------------------------------------------------------------- views
    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segments

    @property
    def start_offset(self) -> int:
        return self._segments[0].start

    @property
    def high_water_mark(self) -> int:
        """The flushed end: the largest offset a fetch can reach (``== end`` is empty)."""
        return self._segments[-1].end

    @property
    def size_written(self) -> int:
        """Start of the last segment + bytes written to it, flushed or not."""
        last = self._segments[-1]
        return last.start + last.size

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed

    # --------------------------------------------------------------------- writing
    def append(self, data: bytes | memoryview, messages: int) -> None:
        """Append whole, validated message bytes counting ``messages`` deep messages.

        An empty ``data`` writes nothing (but still counts toward the flush, like Scala).
        """
        with self._lock:
            if self._closed:
                raise OSError("log is closed")
            seg = self._segments[-1]
            now = self._clock_ms()
            too_old = seg.first_append_ms is not None and \
                now - seg.first_append_ms > self.settings.roll_ms
            if seg.size > self.settings.segment_size or too_old:
                seg = self._roll_locked()
            if len(data):
                view = memoryview(data)
                written = 0
                while written < len(view):
                    written += os.write(seg.fd, view[written:])
                seg.size += written
                if seg.first_append_ms is None:
                    seg.first_append_ms = now
            self._unflushed += messages
            if self._unflushed >= self.settings.flush_interval:
                self._flush_locked()

    def _roll_locked(self) -> Segment:
        old = self._segments[-1]
        self._force_flush_locked()
        start = old.start + old.size
        path = self.dir / segment_name(start)
        if path.exists():
            log.warning("newly rolled segment %s already exists; deleting it first", path)
            path.unlink()
        seg = Segment(path, start, self._open(path, mutable=True), 0)
        log.debug("rolling %s-%d to %s", self.topic, self.partition, path.name)
        self._segments = (*self._segments, seg)
        return seg

    def flush(self) -> None:
        """Make everything appended visible (no-op when no message is unflushed)."""
        if self._unflushed == 0:
            return
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._unflushed == 0 or self._closed:
            return
        self._force_flush_locked()

    def _force_flush_locked(self) -> None:
        seg = self._segments[-1]
        if self.settings.fsync:
            os.fsync(seg.fd)
        seg.hwm = seg.size
        self._unflushed = 0
        self.last_flushed_ms = self._clock_ms()

    # --------------------------------------------------------------------- reading
    def read(self, offset: int, max_size: int) -> FetchRegion:
        """Log.read: the region a fetch answers with, or OffsetOutOfRangeError."""
        segments = self._segments
        end = segments[-1].end
        if offset < segments[0].start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range [{segments[0].start}, {end}]",
                topic=self.topic, partition=self.partition, offset=offset)
        if offset == end:
            return EMPTY_REGION
        i = bisect.bisect_right(segments, offset, key=_start_of) - 1
        seg = segments[i]
        if seg.hwm == 0:  # an empty segment "contains" only its start: nothing to read
            return EMPTY_REGION
        position = offset - seg.start
        return FetchRegion(seg.fd, position, min(max_size, seg.hwm - position))

    def offsets_before(self, when: int, max_offsets: int) -> list[int]:
        """Log.getOffsetsBefore (REFERENCE §4.3); ``max_offsets`` must be >= 0."""
        segments = self._segments
        table = [(s.start, s.mtime_ms()) for s in segments]
        last = segments[-1]
        if last.hwm > 0:
            table.append((last.end, self._clock_ms()))
        if when == LATEST_TIME:
            index = len(table) - 1
        elif when == EARLIEST_TIME:
            index = 0
        else:
            index = len(table) - 1
            while index >= 0 and table[index][1] > when:
                index -= 1
        count = min(max_offsets, index + 1)
        return [table[index - j][0] for j in range(count)]

    # --------------------------------------------------------------------- retention
    def delete_oldest_while(self, predicate: Callable[[Segment], bool]) -> list[Segment]:
        """Log.markDeletedWhile: drop leading segments matching ``predicate``.

        The last segment is never removed; if every segment matches, the last one is kept
        and its mtime reset (as the reference does).  Returned segments are already gone
        from the log; the caller deletes their files and closes their fds later.
        """
        with self._lock:
            segments = self._segments
            n = 0
            while n < len(segments) and predicate(segments[n]):
                n += 1
            if n == len(segments):
                if segments[-1].size > 0:
                    self._roll_locked()
                    segments = self._segments
                else:
                    os.utime(segments[-1].path)
                    n -= 1
            if n <= 0:
                return []
            self._segments = segments[n:]
            return list(segments[:n])

    def close(self) -> None:
        """Flush and close every segment file."""
        with self._lock:
            if self._closed:
                return
            self._flush_locked()
            self._closed = True
            for seg in self._segments:
                with contextlib.suppress(OSError):
                    os.close(seg.fd)
