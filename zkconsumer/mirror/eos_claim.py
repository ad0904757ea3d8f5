"""The exactly-once mirror's claim: fence, read the checkpoint, resume there.

Runs on the consumer's coordinator thread, in ``on_assigned``, before the fetchers start, for
every lane a rebalance hands us (`EosLane`, state CLAIMING):

1. **fence** -- a transactional producer per lane (``init_transactions`` with the lane's
   ``transactional.id`` aborts the previous owner's open transaction and fences it);
2. **read the checkpoints** of all the lanes in one pass over the checkpoint topic
   (read_committed);
3. per lane, side by side (each waits on the target for seconds; one after the other they
   kept the group's other members waiting past their rebalance retries): take the checkpoint
   (or, the first time, write a *claim marker* -- a checkpoint before any data, so a later
   scan has a start), prefer ZooKeeper where it is ahead (an at-least-once run in between),
   scan the target for records past the checkpoint (a broker that shows aborted
   transactions), `seek` the 0.7 fetch position, and open the first transaction.

A lane that is claimed moves to ACTIVE; every target wait is the shared runtime's retry
(`Runtime.retrying`: backoff, `Stopped` on stop).  Docs: docs/mirror.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Protocol

from zkconsumer.mirror.checkpoints import Checkpoint, checkpoint_key, read_checkpoints, scan_beyond
from zkconsumer.mirror.config import MirrorConfig, Partitioning
from zkconsumer.mirror.eos_lane import EosLane, transactional_id
from zkconsumer.mirror.lanes import LaneState
from zkconsumer.mirror.reader import end_offsets
from zkconsumer.mirror.routing import Router
from zkconsumer.mirror.runtime import Runtime

if TYPE_CHECKING:
    from confluent_kafka import Producer

__all__ = ["EosClaimer"]

log = logging.getLogger(__name__)

#: Lanes of one rebalance claimed at once.
_CLAIM_THREADS = 8


class _Seeker(Protocol):
    def seek(self, topic: str, partition: str, offset: int) -> None: ...


class EosClaimer:
    """The claim procedure of the module docstring, for one mirror process."""

    def __init__(self, config: MirrorConfig, runtime: Runtime, group: str, bootstrap: str,
                 consumer: _Seeker, router: Router,
                 new_producer: Callable[[EosLane], Producer]) -> None:
        self.config = config
        self.runtime = runtime
        self.group = group
        self.bootstrap = bootstrap
        self.consumer = consumer
        self.router = router
        self.new_producer = new_producer

    def claim(self, lanes: list[EosLane]) -> None:
        """Claim ``lanes`` (all CLAIMING); each is ACTIVE on return.  `Stopped` on stop."""
        for lane in lanes:  # fence first: the zombie's open transaction is aborted now
            lane.producer = self.runtime.retrying(
                f"initialising transactions for {lane.topic}/{lane.partition}",
                partial(self.new_producer, lane))
        keys = {checkpoint_key(self.group, lane.topic, lane.partition): lane for lane in lanes}
        found = self.runtime.retrying("reading checkpoints", lambda: read_checkpoints(
            self.bootstrap, self.config.checkpoint_topic, keys))
        with ThreadPoolExecutor(max_workers=min(_CLAIM_THREADS, len(keys)),
                                thread_name_prefix="mirror-claim") as pool:
            for done in [pool.submit(self._claim_lane, key, lane, found.get(key))
                         for key, lane in keys.items()]:
                done.result()

    def _claim_lane(self, key: bytes, lane: EosLane, cp: Checkpoint | None) -> None:
        if self.config.partitioning is Partitioning.PRESERVE:
            lane.fixed = self.router.route(lane.topic, lane.partition, b"").partition
        zk = lane.state.fetch_offset
        if cp is not None and cp.offset >= 0 and zk is not None and zk > cp.offset:
            log.warning("%s/%s: ZooKeeper offset %d is ahead of the target's checkpoint %d "
                        "(an at-least-once run?); resuming from ZooKeeper",
                        lane.topic, lane.partition, zk, cp.offset)
            cp = Checkpoint(zk, 0, lane.target_topic, cp.positions)
        if cp is None:
            positions = self.runtime.retrying("reading target watermarks", partial(
                end_offsets, self.bootstrap, lane.target_topic, range(lane.n_target)))
            cp = Checkpoint(-1 if zk is None else zk, 0, lane.target_topic, positions)
            self._write_marker(lane, key, cp)
        lane.resume = (cp.offset, cp.skip)
        lane.positions = dict(cp.positions)
        lane.base = dict(cp.positions)
        lane.already = self.runtime.retrying("scanning the target", partial(
            scan_beyond, self.bootstrap, lane.target_topic, lane.base, lane.source,
            lane.resume))
        if lane.already:
            log.warning("%s/%s: %d records past the checkpoint are visible on the target "
                        "(a broker that shows aborted transactions); not writing them again",
                        lane.topic, lane.partition, len(lane.already))
        lane.filtering = cp.skip > 0 or bool(lane.already)
        if cp.offset >= 0 and cp.offset != zk:
            self.consumer.seek(lane.topic, lane.partition, cp.offset)
        assert lane.producer is not None
        lane.producer.begin_transaction()
        lane.status.move(LaneState.ACTIVE, "claimed")
        tid = transactional_id(self.group, lane.topic, lane.partition)
        if cp.offset >= 0:
            log.info("%s/%s: resuming at 0.7 offset %d (skip %d) under transactional.id %s",
                     lane.topic, lane.partition, cp.offset, cp.skip, tid)
        else:
            log.info("%s/%s: first claim, nothing mirrored yet: starting where the 0.7 "
                     "consumer starts (autooffset.reset) under transactional.id %s",
                     lane.topic, lane.partition, tid)

    def _write_marker(self, lane: EosLane, key: bytes, cp: Checkpoint) -> None:
        """The claim marker: a checkpoint before any data, so a scan has a start."""
        def attempt() -> None:
            producer = lane.producer
            assert producer is not None
            try:
                producer.begin_transaction()
                producer.produce(self.config.checkpoint_topic, cp.encode(), key=key,
                                 partition=0)
                producer.commit_transaction(self.config.transaction_timeout_ms / 1000.0)
            except Exception:
                lane.close_producer()
                lane.producer = self.new_producer(lane)
                raise

        self.runtime.retrying("writing the claim checkpoint", attempt)
