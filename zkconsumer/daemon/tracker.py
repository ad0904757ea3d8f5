"""The acknowledgement ledger between a sink and the consumer group: what may be committed.

The daemon's one promise is *at least once*: an offset reaches ZooKeeper only after the sink
acknowledged the message before it.  Sinks run partly in their own threads (an exec child's
stdout reader, the handler worker), and the consumer must see acknowledgements from the thread
the daemon chooses, so sinks do not call the consumer: they record acknowledgements here and
the daemon *takes* them (`AckTracker.take`) and hands them to ``GroupConsumer.ack``.

Invariants:

* per partition only the **latest** acknowledged message is kept -- acknowledging a message
  acknowledges every earlier one of its partition (the consumer's contract), so sinks must
  acknowledge in order within a partition, and all of ours do;
* **revoked claims**: when a rebalance takes partitions away, messages of those partitions
  still in flight are *abandoned* -- the next owner re-reads them from the committed offset
  -- and neither they nor their acknowledgements may be used afterwards (an ack could move
  an offset of a partition we no longer own, or that we own again and re-read from an
  earlier point).  Which messages are abandoned is decided by the message itself: every
  consumed message carries the number of the claim it was handed out under
  (`zkconsumer.consumer.Message.claim`, increasing with every claim in the process), and
  `revoke` records, per partition, the highest claim number that existed at that moment
  (`latest_claim`).  A message is *stale* iff its claim is at or below that mark.
  So a message of a **new** claim of the same partition -- the same member claiming it
  back a few milliseconds later, polled in the same loop iteration -- is always delivered:
  the consumer already moved its position past it, and dropping it would lose it (issue 11,
  Defect 1: the old ledger guessed staleness from *when* the batch was polled);
* one lock for the whole ledger (`cond`, re-entrant); sinks may share it for their own state
  so that "record acks" and "change in-flight bookkeeping" are one atomic step.  Nobody calls
  into the consumer while holding it (the consumer may be calling our rebalance listener, which
  takes it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

from zkconsumer.consumer import PartitionRun, latest_claim
from zkconsumer.daemon.formats import MessageLike

__all__ = ["AckTracker", "Key", "key_of"]

Key = tuple[str, int, int]
"""A partition as (topic, broker id, partition id)."""


def key_of(m: MessageLike) -> Key:
    return (m.topic, m.broker_id, m.partition_id)


class AckTracker:
    """Latest acknowledged message per partition, plus the claims revoked so far."""

    def __init__(self, *, claims: Callable[[], int] = latest_claim) -> None:
        self.cond = threading.Condition(threading.RLock())
        self._latest_claim = claims
        self._revoked_upto: dict[Key, int] = {}
        self._acked: dict[Key, MessageLike] = {}
        #: Messages acknowledged by the sink (abandoned ones not counted); for metrics.
        self.acked_messages = 0
        #: Acknowledgements dropped because their claim was revoked meanwhile.
        self.abandoned_acks = 0

    def is_stale(self, m: MessageLike | PartitionRun) -> bool:
        """True if ``m`` -- a message, or a run of one claim's messages -- was handed out
        under a claim revoked since (call with `cond`)."""
        return m.claim <= self._revoked_upto.get((m.topic, m.broker_id, m.partition_id), -1)

    def current(self, messages: Sequence[MessageLike]) -> Sequence[MessageLike]:
        """``messages`` without the stale ones (call with `cond` held).

        Sinks call it on every polled batch before taking it: a rebalance that ran between
        the poll and the submit already abandoned the old claims' messages, which must not be
        delivered, and above all not acknowledged, after the fact -- their new owner (maybe
        us again, under a new claim) re-reads them from the committed offset.
        """
        revoked = self._revoked_upto
        if not revoked:
            return messages
        kept: list[MessageLike] | None = None
        last_claim = -1
        last_ok = True
        for i, m in enumerate(messages):
            claim = m.claim
            if claim != last_claim:  # batches come in runs of one claim: one lookup per run
                last_claim = claim
                last_ok = claim > revoked.get((m.topic, m.broker_id, m.partition_id), -1)
            if not last_ok:
                if kept is None:
                    kept = list(messages[:i])
            elif kept is not None:
                kept.append(m)
        return messages if kept is None else kept

    def current_runs(self, runs: Iterable[PartitionRun]) -> list[PartitionRun]:
        """`current` for runs of the batch path: the runs whose claim was not revoked."""
        return [run for run in runs if not self.is_stale(run)]

    def acked_runs(self, runs: Sequence[PartitionRun]) -> None:
        """`acked` for runs of messages (the batch path): one entry per run, not per
        message.  Call with `cond` held; stale runs are dropped."""
        n = 0
        for run in runs:
            if self.is_stale(run):
                self.abandoned_acks += len(run)
                continue
            self._acked[(run.topic, run.broker_id, run.partition_id)] = run.last_message()
            n += len(run)
        self.acked_messages += n
        self.cond.notify_all()

    def acked(self, messages: Sequence[MessageLike]) -> None:
        """Record that the sink acknowledged ``messages`` (in order per partition).

        Call with `cond` held; wakes every waiter.  Stale messages are dropped (counted in
        `abandoned_acks`)."""
        if not messages:
            return
        kept = self.current(messages)
        self.abandoned_acks += len(messages) - len(kept)
        if kept:
            self._acked.update({(m.topic, m.broker_id, m.partition_id): m for m in kept})
            self.acked_messages += len(kept)
        self.cond.notify_all()

    def take(self) -> list[MessageLike]:
        """The latest acknowledged message of each partition since the last call."""
        with self.cond:
            if not self._acked:
                return []
            out = list(self._acked.values())
            self._acked = {}
            return out

    def pending(self) -> int:
        """Partitions with an acknowledgement not yet taken."""
        with self.cond:
            return len(self._acked)

    def revoke(self, keys: Iterable[Key]) -> None:
        """Abandon the in-flight messages of every claim of ``keys`` existing now.

        Called from the consumer's revocation listener, i.e. before the rebalance claims
        anything new: later claims of the same partitions are not affected.
        """
        with self.cond:
            upto = self._latest_claim()
            for key in keys:
                self._revoked_upto[key] = upto
                self._acked.pop(key, None)
            self.cond.notify_all()
