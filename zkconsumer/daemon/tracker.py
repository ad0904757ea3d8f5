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
* **revocation generations**: when a rebalance takes partitions away, messages of those
  partitions still in flight are *abandoned* -- the next owner re-reads them from the committed
  offset -- and an acknowledgement that arrives for them later must not be applied (it could
  move an offset of a partition we no longer own, or that we own again and re-read from an
  earlier point).  Every batch is stamped with `generation` when it is submitted;
  `revoke` bumps the generation and remembers it per partition; `acked` drops messages whose
  partition was revoked after their batch was stamped;
* one lock for the whole ledger (`cond`, re-entrant); sinks may share it for their own state
  so that "record acks" and "change in-flight bookkeeping" are one atomic step.  Nobody calls
  into the consumer while holding it (the consumer may be calling our rebalance listener, which
  takes it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from zkconsumer.daemon.formats import MessageLike

__all__ = ["AckTracker", "Key", "key_of"]

Key = tuple[str, int, int]
"""A partition as (topic, broker id, partition id)."""


def key_of(m: MessageLike) -> Key:
    return (m.topic, m.broker_id, m.partition_id)


class AckTracker:
    """Latest acknowledged message per partition, plus revocation generations."""

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.RLock())
        self._generation = 0
        self._revoked_at: dict[Key, int] = {}
        self._acked: dict[Key, MessageLike] = {}
        #: Messages acknowledged by the sink (abandoned ones not counted); for metrics.
        self.acked_messages = 0
        #: Acknowledgements dropped because their partition was revoked meanwhile.
        self.abandoned_acks = 0

    @property
    def generation(self) -> int:
        """Stamp for a batch submitted now (read under `cond`)."""
        return self._generation

    def is_current(self, key: Key, generation: int) -> bool:
        """False if ``key`` was revoked after a batch stamped ``generation`` was submitted."""
        return self._revoked_at.get(key, -1) <= generation

    def current(self, messages: Sequence[MessageLike],
                generation: int | None) -> Sequence[MessageLike]:
        """``messages`` without those of partitions revoked after ``generation`` (None: all).

        Sinks call it (with `cond` held) on a batch the daemon polled while the tracker was at
        ``generation``: a rebalance that ran between the poll and the submit already
        abandoned those partitions, so their messages must not be delivered, and above all
        not acknowledged, after the fact -- their new owner (maybe us again) re-reads them.
        """
        if generation is None or generation == self._generation:
            return messages
        revoked_at = self._revoked_at
        return [m for m in messages
                if revoked_at.get((m.topic, m.broker_id, m.partition_id), -1) <= generation]

    def acked(self, messages: Sequence[MessageLike], generation: int) -> None:
        """Record that the sink acknowledged ``messages`` (in order) of a batch stamped
        ``generation``.  Call with `cond` held; wakes every waiter."""
        if not messages:
            return
        acked = self._acked
        if generation == self._generation or not self._revoked_at:
            acked.update({(m.topic, m.broker_id, m.partition_id): m for m in messages})
            self.acked_messages += len(messages)
        else:
            revoked_at = self._revoked_at
            n = 0
            for m in messages:
                key = (m.topic, m.broker_id, m.partition_id)
                if revoked_at.get(key, -1) > generation:
                    self.abandoned_acks += 1
                    continue
                acked[key] = m
                n += 1
            self.acked_messages += n
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
        """Abandon in-flight messages of ``keys``: their later acknowledgements are ignored."""
        with self.cond:
            self._generation += 1
            for key in keys:
                self._revoked_at[key] = self._generation
                self._acked.pop(key, None)
            self.cond.notify_all()
