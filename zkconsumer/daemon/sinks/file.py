"""``--output FILE|-``: append each batch to a file (or stdout) with one ``write``.

Why acknowledging right after ``write`` is safe: the daemon commits only after `FileSink.sync`
(flush + ``fsync``) returned, so an offset never reaches ZooKeeper before the bytes it covers
are on disk.  A ``kill -9`` between a write and the next commit replays those messages
(duplicates, never loss).

Invariants:

* the file is opened in **append** mode: a restarted daemon continues after what its
  predecessor wrote (the replayed tail shows up twice).  The one exception: for ``lines``
  and ``jsonl``, a torn last record (a ``kill -9`` landed inside a ``write``) is cut off
  at open, since its batch was never acknowledged and is written again whole;
* one unbuffered ``write`` per batch (the whole batch is built with ``bytes.join``), looped
  until every byte is written;
* `reopen` (SIGHUP) syncs and closes the current file, then opens the path again, so
  logrotate's "move, then signal" leaves no message in the moved file unsynced;
* ``-`` writes to stdout; ``fsync`` on a pipe, terminal or device (``/dev/null``) is skipped
  (it cannot apply).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import sys
from collections.abc import Sequence
from typing import BinaryIO

from zkconsumer.consumer import Columns
from zkconsumer.daemon.formats import MessageLike, encoder_for
from zkconsumer.daemon.sinks.base import Sink
from zkconsumer.daemon.tracker import AckTracker
from zkconsumer.errors import SinkError

__all__ = ["FileSink"]

log = logging.getLogger(__name__)


class FileSink(Sink):
    """Write batches to ``path`` (``-`` = stdout) in ``fmt``; acknowledge after each write."""

    kind = "file"

    def __init__(self, tracker: AckTracker, path: str, fmt: str = "lines",
                 value_encoding: str = "utf-8") -> None:
        super().__init__(tracker)
        self.path = path
        self._encode = encoder_for(fmt, value_encoding)
        self._delimited = fmt in ("lines", "jsonl")  # records end in a newline
        self._fd: int | None = None
        self._stdout: BinaryIO | None = None
        self._regular = True
        self.bytes_written = 0

    def start(self) -> None:
        self._open()

    def _open(self) -> None:
        if self.path == "-":
            self._stdout = sys.stdout.buffer
            return
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                               0o644)
            # fsync applies to regular files only: on a device (/dev/null) it fails EINVAL
            self._regular = stat.S_ISREG(os.fstat(self._fd).st_mode)
            if self._delimited and self._regular:
                self._repair_tail(self._fd)
        except OSError as exc:
            raise SinkError(f"cannot open output file {self.path!r}: {exc}") from exc
        log.info("output file %s opened", self.path, extra={"event": "output_open",
                                                            "path": self.path})

    def _repair_tail(self, fd: int) -> None:
        """Cut a torn last record (no final newline) left by a crash in the middle of a write.

        Its batch was never acknowledged, so its messages are replayed after the restart;
        keeping the fragment would glue it to the first replayed record.
        """
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        keep = size
        while keep > 0:
            start = max(0, keep - 65536)
            chunk = os.pread(fd, keep - start, start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            keep = start
        os.ftruncate(fd, keep)
        log.warning("output file %s ended in a torn record (a crash during a write); cut %d "
                    "bytes -- those messages were not committed and are written again",
                    self.path, size - keep, extra={"event": "output_repair"})

    def submit(self, batch: Sequence[MessageLike]) -> None:
        data = self._encode(batch)
        tracker = self.tracker
        with tracker.cond:  # a rebalance may sync or a SIGHUP reopen from another thread
            kept = tracker.current(batch)
            if len(kept) != len(batch):  # a rebalance ran since the poll (rare)
                batch = kept
                if not batch:
                    return
                data = self._encode(batch)
            self._write_locked(data)
            tracker.acked(batch)

    def submit_columns(self, columns: Columns) -> None:
        """The batch path: whole runs are checked, encoded, written and acknowledged,
        without a `Message` per message."""
        tracker = self.tracker
        with tracker.cond:
            runs = tracker.current_runs(columns.runs())
            if not runs:
                return
            self._write_locked(self._encode.runs(runs))
            tracker.acked_runs(runs)

    def _write_locked(self, data: bytes) -> None:
        """Write ``data`` whole (with ``tracker.cond`` held); `SinkError` if that fails."""
        try:
            if self._stdout is not None:
                self._stdout.write(data)
            else:
                self._write_all(data)
        except OSError as exc:
            self.errors += 1
            raise SinkError(f"cannot write to {self.path!r}: {exc}") from exc
        self.bytes_written += len(data)

    def _write_all(self, data: bytes) -> None:
        fd = self._fd
        if fd is None:
            raise OSError(errno.EBADF, "output file is not open")
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]

    def sync(self) -> None:
        with self.tracker.cond:
            self._sync_locked()

    def _sync_locked(self) -> None:
        try:
            if self._stdout is not None:
                self._stdout.flush()
                _fsync_if_file(self._stdout.fileno())
            elif self._fd is not None and self._regular:
                os.fsync(self._fd)
        except OSError as exc:
            self.errors += 1
            raise SinkError(f"cannot flush {self.path!r}: {exc}") from exc

    def reopen(self) -> None:
        if self.path == "-":
            return
        with self.tracker.cond:
            self._sync_locked()
            self._close_fd()
            self._open()
        log.info("output file %s reopened", self.path, extra={"event": "output_reopen",
                                                              "path": self.path})

    def close(self, timeout: float) -> None:
        with self.tracker.cond:
            try:
                self._sync_locked()
            finally:
                self._close_fd()

    def _close_fd(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _fsync_if_file(fd: int) -> None:
    """fsync ``fd`` when it is something fsync applies to (not a pipe, socket or tty)."""
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF, errno.EROFS):
            raise
