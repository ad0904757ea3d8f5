"""``--exec CMD``: a supervised child process that acknowledges what it has processed.

The exec protocol (also in docs/operations.md):

* the daemon starts ``/bin/sh -c CMD`` in its own process group, with stderr inherited and
  ``ZKCONSUMER_FORMAT`` (``lines``/``jsonl``/``binary``) and ``ZKCONSUMER_RESTARTS`` (how many
  children ran before this one) in its environment;
* it writes messages to the child's **stdin** in that format, in order, as they are consumed;
* the child writes to **stdout** one line per acknowledgement, always for the *oldest*
  messages not acknowledged yet (in-order):

  - ``ok``     acknowledges the next 1 message,
  - ``ack N``  acknowledges the next N messages (N >= 1; use it to acknowledge a batch),
  - empty lines are ignored; anything else is a protocol error;

* only acknowledged messages are committed.  When the child exits, crashes or breaks the
  protocol (unknown line, more acknowledgements than messages sent) it is restarted after a
  backoff (``--restart-backoff`` doubling up to ``--restart-backoff-max``, reset once a child
  acknowledges something) and **every unacknowledged message is written again** to the new
  child first, in the original order -- nothing is skipped;
* a command that cannot be started at all is an error, not a restart loop: the shell itself
  cannot be spawned, or -- before any child has worked (acknowledged something or lived
  ``quick_exit`` = 1 s) -- a child exits with status 127 (command not found) or 126 (not
  executable).  `start` waits ``startup_probe`` (0.2 s) for that, so the usual case fails
  before the daemon joins the group; later it sets `Sink.failure` and stops restarting;
* a child that exits within ``quick_exit`` without acknowledging anything is a *quick
  failure*; after ``max_restarts`` restarts in a row that all failed quickly the sink gives
  up (`Sink.failure`; 0 = never give up).  The daemon then exits non-zero, committing only
  what was acknowledged;
* the command's processes are one process group (the shell's): when the shell exits -- on
  its own, or killed (``kill`` of the ``/bin/sh`` wrapper) -- whatever is left of the group
  gets SIGKILL, so no orphan keeps the pipes open and the exit is seen and restarted;
* at shutdown the daemon waits for acknowledgements (``--shutdown-timeout``), then closes the
  child's stdin; a child should exit on EOF.  One still running is sent SIGTERM, then
  SIGKILL -- the whole process group, both within the time `close` is given (`STOP_SHARES`);
  a second signal to the daemon SIGKILLs the group at once (`kill`).

Invariants: the daemon never has more than ``--max-in-flight`` unacknowledged messages written
(the main loop stops polling, which is the backpressure); ``_batches`` lists, in write order,
exactly the messages written to the *current* child and not yet acknowledged (as message lists
or, from the batch path, as runs of a partition: `_Sent`), so an ``ack N`` maps to the next N
entries; messages of partitions revoked by a rebalance stay in ``_batches``
(acknowledgements must still line up) but their acknowledgements are ignored (`AckTracker`)
and they are not written again to a new child.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence

from zkconsumer.backoff import Backoff
from zkconsumer.consumer import Columns, PartitionRun
from zkconsumer.daemon.formats import BatchEncoder, MessageLike, encoder_for
from zkconsumer.daemon.sinks.base import Sink
from zkconsumer.daemon.tracker import AckTracker
from zkconsumer.errors import SinkError

__all__ = ["STOP_SHARES", "ExecSink", "ProtocolViolation", "parse_acks"]

log = logging.getLogger(__name__)

#: How `ExecSink.close` splits its time: waiting for the child to exit after stdin EOF, then
#: after SIGTERM to its process group; SIGKILL comes with the rest (10 %) still left, to reap.
STOP_SHARES = (0.6, 0.3)


class ProtocolViolation(ValueError):
    """The child wrote something that is not an acknowledgement line (internal only)."""


def parse_acks(lines: Sequence[bytes]) -> int:
    """Number of messages acknowledged by complete stdout ``lines`` (without ``\\n``)."""
    n = lines.count(b"ok")
    if n == len(lines):
        return n
    total = 0
    for raw in lines:
        line = raw.strip()
        if line == b"ok":
            total += 1
        elif not line:
            continue
        elif line.startswith(b"ack ") or line.startswith(b"ack\t"):
            try:
                count = int(line[4:].strip())
            except ValueError:
                count = 0
            if count < 1:
                raise ProtocolViolation(f"bad acknowledgement line {raw[:80]!r}")
            total += count
        else:
            raise ProtocolViolation(f"unknown line on stdout {raw[:80]!r} "
                                    "(expected 'ok' or 'ack N')")
    return total


class _Sent:
    """What one submit wrote to the current child, not yet acknowledged: ``items[start:]``.

    ``items`` is a list of messages (`ExecSink.submit`) or one `PartitionRun` of the batch
    path (`ExecSink.submit_columns`, which writes and tracks whole runs without a `Message`
    per message); ``seq`` numbers the submit call (`ExecSink.drain`).
    """

    __slots__ = ("items", "seq", "start")

    def __init__(self, items: list[MessageLike] | PartitionRun, seq: int) -> None:
        self.items = items
        self.seq = seq
        self.start = 0

    def __len__(self) -> int:
        return len(self.items)

    def ack(self, tracker: AckTracker, end: int) -> None:
        """Acknowledge ``items[start:end]`` (with ``tracker.cond`` held)."""
        items = self.items
        if isinstance(items, PartitionRun):
            tracker.acked_runs([items.slice(self.start, end)])
        else:
            tracker.acked(items[self.start:end])
        self.start = end

    def rest(self, tracker: AckTracker) -> _Sent | None:
        """The unacknowledged, still current remainder, for a new child (None: nothing)."""
        items = self.items
        if isinstance(items, PartitionRun):
            if self.start == len(items) or tracker.is_stale(items):
                return None
            return _Sent(items.slice(self.start), self.seq)
        messages = list(tracker.current(items[self.start:]))
        return _Sent(messages, self.seq) if messages else None

    def encode(self, encoder: BatchEncoder) -> bytes:
        items = self.items
        return encoder.runs([items]) if isinstance(items, PartitionRun) else encoder(items)


class _Child:
    """One exec command: ``/bin/sh -c CMD``, leader of its own process group."""

    def __init__(self, proc: subprocess.Popen[bytes], number: int) -> None:
        self.proc = proc
        self.number = number
        self.started = time.monotonic()
        self.queue: queue.Queue[bytes | None] = queue.Queue()
        self.acked = 0
        threading.Thread(target=self._reap, daemon=True,
                         name=f"zkconsumer-exec-reaper-{proc.pid}").start()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (the shell and everything it started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def _reap(self) -> None:
        """Once the shell is gone, end what is left of its group: an orphan would keep
        stdout open, so the exit would never be seen (and it would outlive the daemon)."""
        self.proc.wait()
        self.kill()

    def stop(self, timeout: float) -> None:
        """Within ``timeout`` s after stdin EOF: wait, SIGTERM the group, wait, SIGKILL it."""
        deadline = time.monotonic() + max(timeout, 0.0)
        eof_share, term_share = STOP_SHARES
        if self._wait(time.monotonic() + eof_share * timeout):
            return
        log.warning("exec child pid %d did not exit after stdin EOF; terminating its process "
                    "group", self.proc.pid, extra={"event": "sink_terminate",
                                                    "pid": self.proc.pid})
        self.kill(signal.SIGTERM)
        if self._wait(time.monotonic() + term_share * timeout):
            return
        log.warning("exec child pid %d ignored SIGTERM; killing its process group",
                    self.proc.pid, extra={"event": "sink_terminate", "pid": self.proc.pid})
        self.kill(signal.SIGKILL)
        self._wait(deadline)

    def _wait(self, until: float) -> bool:
        try:
            self.proc.wait(max(until - time.monotonic(), 0.0))
            return True
        except subprocess.TimeoutExpired:
            return False


class ExecSink(Sink):
    """Feed messages to a supervised child; commit only what it acknowledged."""

    kind = "exec"

    def __init__(self, tracker: AckTracker, command: str, fmt: str = "lines",
                 value_encoding: str = "utf-8", *, restart_backoff: float = 0.5,
                 restart_backoff_max: float = 30.0, max_restarts: int = 10,
                 quick_exit: float = 1.0, startup_probe: float = 0.2,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(tracker)
        self.command = command
        self.format = fmt
        self._encode = encoder_for(fmt, value_encoding)
        self._backoff = Backoff(restart_backoff, restart_backoff_max)
        self._max_restarts = max_restarts
        self._quick_exit = quick_exit
        self._startup_probe = startup_probe
        self._env = env
        self._worked = False  # some child acknowledged something or outlived quick_exit
        self._batches: deque[_Sent] = deque()
        self._unacked = 0
        self._seq = 0
        self._child: _Child | None = None
        self._children = 0
        self._closing = threading.Event()
        self._supervisor: threading.Thread | None = None
        #: Messages written again to a restarted child.
        self.redelivered = 0

    # -- main-thread API ---------------------------------------------------------------------

    def start(self) -> None:
        child = self._spawn()  # fail fast if the shell itself cannot be started
        try:  # ... or if the command cannot be run (sh exits 126/127 at once)
            status: int | None = child.proc.wait(self._startup_probe)
        except subprocess.TimeoutExpired:
            status = None
        if status is not None and self._cannot_start(status):
            with self.tracker.cond:
                self._child = None
            child.queue.put(None)  # the writer thread closes stdin
            if child.proc.stdout is not None:
                child.proc.stdout.close()
            raise SinkError(self._cannot_start_message(status))
        self._supervisor = threading.Thread(target=self._supervise, args=(child,),
                                            name="zkconsumer-exec-supervisor", daemon=True)
        self._supervisor.start()

    def submit(self, batch: Sequence[MessageLike]) -> None:
        with self.tracker.cond:
            messages = list(self.tracker.current(batch))
            if not messages:
                return
            self._batches.append(_Sent(messages, self._seq))
            self._seq += 1
            self._unacked += len(messages)
            child = self._child
            if child is not None:
                child.queue.put(self._encode(messages))
            # else: the supervisor writes it to the next child with the rest.

    def submit_columns(self, columns: Columns) -> None:
        """The batch path: whole runs are checked, encoded and tracked, no `Message` per
        message (an ``ack N`` acknowledges a slice of a run)."""
        with self.tracker.cond:
            runs = self.tracker.current_runs(columns.runs())
            if not runs:
                return
            self._batches.extend(_Sent(run, self._seq) for run in runs)
            self._seq += 1
            self._unacked += sum(len(run) for run in runs)
            child = self._child
            if child is not None:
                child.queue.put(self._encode.runs(runs))

    def inflight(self) -> int:
        return self._unacked

    @property
    def child_pid(self) -> int | None:
        """pid of the running child (its process group id too), None between restarts."""
        child = self._child
        return child.proc.pid if child is not None else None

    def drain(self, timeout: float) -> bool:
        with self.tracker.cond:
            target = self._seq
            return self.tracker.cond.wait_for(
                lambda: not self._batches or self._batches[0].seq >= target, timeout)

    def close(self, timeout: float) -> None:
        deadline = time.monotonic() + max(timeout, 0.0)
        self._closing.set()
        with self.tracker.cond:
            child = self._child
            self.tracker.cond.notify_all()
        if child is not None:
            child.queue.put(None)  # EOF once the queued data is written
            child.stop(timeout)
        if self._supervisor is not None:
            self._supervisor.join(max(deadline - time.monotonic(), 0.0))

    def kill(self) -> None:
        child = self._child
        if child is not None:
            child.kill()

    # -- child management --------------------------------------------------------------------

    def _spawn(self) -> _Child:
        """Start a child and queue every unacknowledged message for it, in order."""
        tracker = self.tracker
        env = dict(os.environ if self._env is None else self._env)
        env["ZKCONSUMER_FORMAT"] = self.format
        env["ZKCONSUMER_RESTARTS"] = str(self._children)
        with tracker.cond:
            keep = deque(rest for rest in (old.rest(tracker) for old in self._batches)
                         if rest is not None)
            self._batches = keep
            self._unacked = sum(len(sent) for sent in keep)
            try:
                proc = subprocess.Popen(["/bin/sh", "-c", self.command], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, env=env, start_new_session=True)
            except OSError as exc:
                raise SinkError(f"cannot start exec command {self.command!r}: {exc}") from exc
            child = _Child(proc, self._children)
            self._children += 1
            for sent in keep:
                child.queue.put(sent.encode(self._encode))
            if self._children > 1:
                self.redelivered += self._unacked
            self._child = child
        threading.Thread(target=self._write_loop, args=(child,), daemon=True,
                         name=f"zkconsumer-exec-writer-{proc.pid}").start()
        log.info("exec child pid %d started (%d unacknowledged messages to redeliver)",
                 proc.pid, self._unacked if child.number else 0,
                 extra={"event": "sink_start", "pid": proc.pid})
        return child

    def _cannot_start(self, status: int) -> bool:
        """Whether a child's exit means the command cannot be run at all (see module doc)."""
        return not self._worked and status in (126, 127)

    def _cannot_start_message(self, status: int) -> str:
        why = "command not found" if status == 127 else "found but not executable"
        return (f"--exec {self.command!r} cannot be started: /bin/sh exited with status "
                f"{status} ({why})")

    def _fail(self, message: str) -> None:
        """Give up: no more children; the daemon sees `failure` and stops (no commit of
        anything unacknowledged)."""
        log.error("%s; giving up", message, extra={"event": "sink_failed"})
        with self.tracker.cond:
            self.failure = SinkError(message)
            self.tracker.cond.notify_all()

    def _supervise(self, child: _Child) -> None:
        backoff = self._backoff
        quick_failures = 0  # consecutive children that exited within quick_exit, no ack
        while True:
            self._read_acks(child)
            status = child.proc.wait()
            child.queue.put(None)  # its writer thread may wait for data that never comes: end it
            lived = time.monotonic() - child.started
            with self.tracker.cond:
                if self._child is child:
                    self._child = None
                unacked = self._unacked
                self.tracker.cond.notify_all()
            if self._closing.is_set():
                log.info("exec child pid %d exited with status %s", child.proc.pid, status,
                         extra={"event": "sink_exit", "pid": child.proc.pid, "status": status})
                return
            self.errors += 1
            if self._cannot_start(status) and not child.acked:
                self._fail(self._cannot_start_message(status))
                return
            quick = not child.acked and lived < self._quick_exit
            if not quick:
                self._worked = True
            quick_failures = quick_failures + 1 if quick else 0
            if self._max_restarts and quick_failures > self._max_restarts:
                self._fail(f"--exec {self.command!r}: the child exited within "
                           f"{self._quick_exit:g}s without acknowledging anything "
                           f"{quick_failures} times in a row (last status {status}; "
                           f"--exec-max-restarts {self._max_restarts})")
                return
            self.restarts += 1
            if child.acked:
                backoff.reset()
            delay = backoff.next_delay()
            hint = " (command not found?)" if status == 127 else ""
            log.error("exec child pid %d exited with status %s%s; %d unacknowledged messages "
                      "will be redelivered; restarting in %.1fs", child.proc.pid, status, hint,
                      unacked, delay,
                      extra={"event": "sink_restart", "pid": child.proc.pid, "status": status,
                             "unacked": unacked, "backoff": delay})
            if self._closing.wait(delay):
                return
            while True:
                try:
                    child = self._spawn()
                    break
                except SinkError as exc:
                    delay = backoff.next_delay()
                    log.error("%s; retrying in %.1fs", exc, delay)
                    if self._closing.wait(delay):
                        return

    def _write_loop(self, child: _Child) -> None:
        assert child.proc.stdin is not None
        fd = child.proc.stdin.fileno()
        try:
            while True:
                data = child.queue.get()
                if data is None:
                    break
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
        except OSError:
            pass  # the child is gone; the supervisor sees it on stdout and restarts it
        finally:
            with contextlib.suppress(OSError):
                child.proc.stdin.close()

    def _read_acks(self, child: _Child) -> None:
        assert child.proc.stdout is not None
        fd = child.proc.stdout.fileno()
        pending = b""
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                if b"\n" not in chunk:
                    pending += chunk
                    if len(pending) > 65536:
                        raise ProtocolViolation("stdout line longer than 64 KiB")
                    continue
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                n = parse_acks(lines)
                if n:
                    self._on_acks(child, n)
        except ProtocolViolation as exc:
            log.error("exec child pid %d broke the protocol: %s; restarting it",
                      child.proc.pid, exc, extra={"event": "sink_protocol_error",
                                                   "pid": child.proc.pid})
            child.kill()
            _drain_fd(fd)
        finally:
            child.proc.stdout.close()

    def _on_acks(self, child: _Child, n: int) -> None:
        tracker = self.tracker
        with tracker.cond:
            if child is not self._child:
                return
            if n > self._unacked:
                raise ProtocolViolation(f"{n} acknowledgements but only {self._unacked} "
                                        "messages are waiting for one")
            child.acked += n
            self._worked = True
            self._unacked -= n
            batches = self._batches
            while n:
                sent = batches[0]
                end = min(sent.start + n, len(sent))
                n -= end - sent.start
                sent.ack(tracker, end)
                if end == len(sent):
                    batches.popleft()
            tracker.cond.notify_all()


def _drain_fd(fd: int) -> None:
    """Read a killed child's stdout to EOF so it cannot block on a full pipe."""
    deadline = time.monotonic() + 5.0
    try:
        while os.read(fd, 65536) and time.monotonic() < deadline:
            pass
    except OSError:
        pass
