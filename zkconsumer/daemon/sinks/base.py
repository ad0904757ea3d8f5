"""The contract every sink keeps with the daemon's main loop.

The main loop (one thread) polls the consumer and calls `Sink.submit` with each batch; a
sink acknowledges messages -- now or later, from any thread -- by calling
``tracker.acked(messages)`` with ``tracker.cond`` held.  The daemon turns those
acknowledgements into ``GroupConsumer.ack`` calls and commits them.

Invariants every sink keeps:

* messages of one partition are acknowledged in the order they were submitted;
* nothing is acknowledged before the sink has done what "delivered" means for it (written to
  the file object, acknowledged by the child, returned from the handler);
* `sync` makes everything acknowledged so far durable (the daemon calls it before every
  commit), so a crash after the commit cannot lose an acknowledged message;
* a batch is filtered with ``AckTracker.current(batch)`` under ``tracker.cond`` when it is
  taken: a batch polled before a rebalance and submitted after it must not smuggle messages
  of an abandoned claim in (acknowledged, they would move the offset past abandoned,
  unprocessed ones), while messages of a new claim -- even of the same partition, even in
  the same batch -- must be taken (the consumer's position is already past them);
* `inflight` counts messages submitted and neither acknowledged nor dropped: the daemon
  polls only while it is below ``--max-in-flight`` (backpressure);
* a sink that gives up on its own (not in a call from the daemon) sets `failure`;
* `drain` waits (bounded) for work already handed to user code; `abandon` forgets
  messages of revoked partitions that were not handed over yet (their new owner re-reads
  them from the committed offset).
"""

from __future__ import annotations

from collections.abc import Sequence

from zkconsumer.consumer import Columns
from zkconsumer.daemon.formats import MessageLike
from zkconsumer.daemon.tracker import AckTracker, Key
from zkconsumer.errors import SinkError

__all__ = ["Sink"]


class Sink:
    """Base of the three sinks; see the module docstring for the contract."""

    #: Short name used in logs and metric labels.
    kind: str = "sink"

    def __init__(self, tracker: AckTracker) -> None:
        self.tracker = tracker
        #: Failures of user code or output (handler exceptions, child crashes, write errors).
        self.errors = 0
        #: Restarts of an exec child.
        self.restarts = 0
        #: Set (from any thread, with ``tracker.cond`` held, then notified) by a sink that
        #: cannot go on, e.g. an exec command that cannot be started: the daemon stops,
        #: commits only what was acknowledged and exits with this error.
        self.failure: SinkError | None = None

    def start(self) -> None:
        """Open files / start threads and children.  Raises `SinkError`."""

    def submit(self, batch: Sequence[MessageLike]) -> None:
        """Take a polled batch (main thread).  Must not block on user code.

        With `tracker.cond` held, drop the messages `AckTracker.current` rejects (a rebalance
        revoked their claim between the poll and this call); take every other one.
        """
        raise NotImplementedError

    def submit_columns(self, columns: Columns) -> None:
        """Take a batch polled through the consumer's batch path (main thread).

        The same contract as `submit`; this default hands the messages over one by one.
        Sinks that can work on whole runs (the file sink) override it and skip the
        per-message objects.
        """
        self.submit(list(columns.messages()))

    def inflight(self) -> int:
        """Messages submitted and not yet acknowledged or dropped."""
        return 0

    def drain(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for work already handed to user code; True if done."""
        return True

    def abandon(self, keys: set[Key]) -> None:
        """Forget not-yet-delivered messages of ``keys`` (partitions being revoked)."""

    def sync(self) -> None:
        """Make every acknowledged message durable before a commit.  Raises `SinkError`."""

    def reopen(self) -> None:
        """Reopen output files (SIGHUP, after logrotate moved them)."""

    def close(self, timeout: float) -> None:
        """Stop taking messages and release resources within ``timeout`` s."""

    def kill(self) -> None:
        """The process exits now (second signal): end what would outlive it (an exec
        command's processes).  Signal-handler safe: no locks, no waiting."""
