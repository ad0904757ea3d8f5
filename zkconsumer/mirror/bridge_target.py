"""The 0.7 side of the bridge: batches into 0.7 partitions, exactly once when the only writer.

0.7 has no idempotent producer and no transactions, but its offsets are **byte offsets**: the
log end before a batch plus the batch's encoded size says where the log ends once the batch
landed.  So every batch into a 0.7 partition is written in three steps, with a checkpoint per
(0.7 partition, bridge group) in ZooKeeper (`zkconsumer.zk.paths.BridgeCheckpoint`):

1. **intent** -- compare-and-set the checkpoint to ``intent = {owner, start = end, size,
   sources}`` (``sources``: per source partition, the next source offset once this batch is
   in);
2. **produce**, confirmed (``zkconsumer.client.confirmed_produce``: a produce followed by an
   offsets request on the same connection, so a rejection is seen);
3. **resolve** -- compare-and-set the checkpoint to ``end = start + size``, ``sources``
   merged, the range ``[start, end)`` recorded, no intent.  ``start`` is where the batch
   *landed*, read back (`zkconsumer.mirror.bridge_readback`; one multifetch per broker):
   another producer's sets may have landed after the end we knew, and a range off by them
   would make the forward mirror skip their messages and copy ours back.

A crash between 1 and 3 leaves an intent whose owner's member znode
(``/zkconsumer/bridge/<group>/members/<id>``, ephemeral) vanishes with its session.  Whoever
next needs the partition *resolves* it: it waits until the broker's flushed end (what 0.7's
offsets request reports) reaches ``start + size`` (landed: merge it) or stays at ``start``
for ``mirror.bridge.flush.wait.ms`` (not landed: drop it).  An intent of a *live* owner is
waited for.  The compare-and-set makes two bridge processes of one group write a shared 0.7
partition one batch at a time.

**Shared partitions.**  Any other end -- the flushed end past our own end, or between start
and start + size -- means another producer writes this partition too.  The checkpoint is
marked ``shared`` (logged once as a WARNING; a batch read back further on than its intent
says so too); from then on each intent starts at the broker's flushed end, and an unresolved
intent counts as *not* landed: the batch is written again (at-least-once; at most one batch,
``mirror.poll.batch`` messages, duplicated per partition per crash) instead of risking a loss.

The bridge reads checkpoints at claim time (`checkpoint`) to skip source records that are in
0.7 already; the forward mirror reads them (`zkconsumer.mirror.loopguard`) to skip what a
bridge wrote.  Sets are encoded with the target topic's codec (``target.compression.codec``,
``target.compressed.topics``), compressed wrappers cut at ``max.message.size``.

Invariant: a checkpoint's ``end`` and ``sources`` only ever describe confirmed data (or, after
a crash, data the flushed end proves landed); nothing is committed on the source before that.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from zkconsumer.client import confirmed_produce
from zkconsumer.errors import MessageTooLargeError, MirrorError, TargetError, ZooKeeperError
from zkconsumer.mirror.bridge_links import BrokerLinks
from zkconsumer.mirror.bridge_readback import Readback
from zkconsumer.mirror.kafka07 import producer07_config
from zkconsumer.mirror.runtime import Runtime, Stopped
from zkconsumer.producer.cluster import ZkClusterView, zk_session
from zkconsumer.producer.encoding import encode_sets
from zkconsumer.producer.partitioning import BrokerPartition
from zkconsumer.protocol import ProduceRequest
from zkconsumer.zk.multi import set_if_versions
from zkconsumer.zk.paths import (
    BridgeCheckpoint,
    BridgeIntent,
    bridge_checkpoint_path,
    bridge_member_path,
    parse_bridge_checkpoint,
)
from zkconsumer.zk.session import ZkSession

__all__ = ["Kafka07Sink"]

log = logging.getLogger(__name__)
T = TypeVar("T")
#: A ZooKeeper server closes the connection of a request over ``jute.maxbuffer`` (1 MiB by
#: default), and a retry would meet the same fate: checkpoints past half of it (many 0.7
#: partitions on one broker, each with its byte ranges) are stored one by one instead.
_MULTI_MAX_BYTES = 512 * 1024



class _Slot:
    """One 0.7 partition this process writes: where, and the checkpoint as last seen."""

    __slots__ = ("checked", "cp", "path", "target", "topic", "version")

    def __init__(self, topic: str, target: BrokerPartition, path: str) -> None:
        self.topic = topic
        self.target = target
        self.path = path
        self.cp: BridgeCheckpoint | None = None
        self.version = -1  # -1: the znode does not exist
        self.checked = False  # the flushed end was compared with ours since the last load


class Kafka07Sink:
    """Write batches into a 0.7 cluster under bridge checkpoints (module docstring)."""

    def __init__(self, zk_connect: str, options: Mapping[str, str], group: str,
                 runtime: Runtime, *, flush_wait: float = 10.0) -> None:
        self.config = producer07_config(zk_connect, options)
        self.zk_connect = zk_connect
        self.description = f"kafka07://{zk_connect}"
        self.group = group
        self.member_id = uuid.uuid4().hex
        self.runtime = runtime
        self.flush_wait = flush_wait
        self._view: ZkClusterView | None = None
        self._links: BrokerLinks | None = None
        self._session: ZkSession | None = None
        self._session_id: int | None = None
        self._slots: dict[tuple[str, int], _Slot] = {}
        self._opening: list[ZkSession] = []  # sessions `open` is starting (`close` aborts)
        self._lock = threading.Lock()  # guards _opening and _closed
        self._closed = False
        self._readback = Readback(self._brokers, runtime, flush_wait)

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> None:
        """Connect to the 0.7 cluster's ZooKeeper and register this process as a member.
        `Startable` (``start`` / ``close``) for the runtime's `StartGuard`: a `close` from
        another thread abandons a connection attempt in progress (the attempt raises)."""
        if self._session is not None:
            return
        if self._view is None:  # kept by an attempt whose member session did not connect
            self._view = self._starting(lambda s: ZkClusterView(self.config, session=s))
            self._links = BrokerLinks(self.config, self._view)
        session = self._starting(ZkSession.start)
        path = bridge_member_path(self.group, self.member_id)
        if not session.create_ephemeral_expect_conflict(path, b""):
            session.close()
            raise MirrorError(f"bridge member {path} exists already")
        self._session, self._session_id = session, session.session_id

    start = open

    def _starting(self, use: Callable[[ZkSession], T]) -> T:
        """``use(session)`` for a new session with the producer's settings, which starts it;
        a `close` meanwhile closes the session, and the start raises at once."""
        session = zk_session(self.config)
        with self._lock:
            if self._closed:
                raise ZooKeeperError("the bridge's 0.7 target was closed while connecting")
            self._opening.append(session)
        try:
            return use(session)
        finally:
            with self._lock:
                self._opening.remove(session)

    @property
    def connecting(self) -> bool:
        """`open` is connecting a ZooKeeper session now."""
        return bool(self._opening)

    def close(self, timeout: float = 0.0) -> None:
        """Close for good; from another thread while `open` connects, abandon its attempt."""
        with self._lock:
            self._closed = True
            opening = list(self._opening)
        for session in opening:
            session.close()  # its start() raises at once
        if self._links is not None:
            self._links.close()
            self._links = None
        if self._session is not None:
            self._session.close()  # the member znode vanishes with it
            self._session = None
        if self._view is not None:
            self._view.close()
            self._view = None

    # -- topology -----------------------------------------------------------------------------

    def partitions(self, topic: str) -> list[BrokerPartition]:
        """The 0.7 producer's partition list of ``topic`` (numeric (broker, partition)
        order); `TargetError` if no broker is alive."""
        assert self._view is not None, "open() first"
        parts = self._view.partitions(topic)
        if not parts:
            raise TargetError(f"no live broker in {self.description} for topic {topic!r}")
        return list(parts)

    def _slot(self, topic: str, index: int) -> _Slot:
        slot = self._slots.get((topic, index))
        if slot is None:
            target = self.partitions(topic)[index]
            name = f"{target.broker_id}-{target.partition}"
            slot = _Slot(topic, target, bridge_checkpoint_path(self.group, topic, name))
            self._slots[(topic, index)] = slot
        return slot

    def _zk(self) -> ZkSession:
        session = self._session
        if session is None:
            raise MirrorError("the bridge's 0.7 target is not open")
        if session.session_id != self._session_id:
            raise self.runtime.fail(MirrorError(
                "the bridge's ZooKeeper session on the 0.7 cluster expired: its in-flight "
                "batches may have been resolved by another member; restart it"))
        return session

    # -- checkpoints --------------------------------------------------------------------------

    def checkpoint(self, topic: str, index: int) -> BridgeCheckpoint:
        """The checkpoint of partition ``index`` of ``topic``, every dead owner's intent
        resolved (a live owner's waited for)."""
        slot = self._slot(topic, index)
        self._settle(slot)
        assert slot.cp is not None
        return slot.cp

    def _load(self, slot: _Slot) -> None:
        node = self._zk().get_node(slot.path)
        if node is None:
            slot.cp, slot.version = None, -1
        else:
            slot.cp = parse_bridge_checkpoint(slot.path, node.data)
            slot.version = node.version
        slot.checked = False

    def _store(self, slot: _Slot, cp: BridgeCheckpoint) -> bool:
        """Compare-and-set ``cp``; False (and reloaded) if someone else wrote meanwhile."""
        session = self._zk()
        if slot.version < 0:
            stored = session.create_if_absent(slot.path, cp.encode())
            version: int | None = 0 if stored else None
        else:
            version = session.set_if_version(slot.path, cp.encode(), slot.version)
        if version is None:
            self._load(slot)
            return False
        slot.cp, slot.version = cp, version
        return True

    def _store_all(self, stores: Sequence[tuple[_Slot, BridgeCheckpoint]]) -> bool:
        """`_store` for several checkpoints in one ZooKeeper multi (`set_if_versions`): True
        if all were stored, False if none was (someone wrote one meanwhile: look again, one
        by one).  One round trip instead of one per 0.7 partition."""
        if not stores:
            return True
        if len(stores) == 1 or any(slot.version < 0 for slot, _cp in stores):
            return False  # one by one: a plain set, or a checkpoint `_store` must create
        writes = [(slot.path, cp.encode(), slot.version) for slot, cp in stores]
        if sum(len(data) + len(path) for path, data, _v in writes) > _MULTI_MAX_BYTES:
            return False  # one by one: ZooKeeper drops a request over its jute.maxbuffer
        versions = set_if_versions(self._zk(), writes)
        if versions is None:
            return False  # nothing was written; nothing reloaded (the caller's `_store`s do)
        for (slot, cp), version in zip(stores, versions, strict=True):
            slot.cp, slot.version = cp, version
        return True

    def _settle(self, slot: _Slot) -> None:
        """Make ``slot.cp`` current and intent-free (ours to write next)."""
        if slot.cp is None or slot.cp.intent is not None or not slot.checked:
            self._load(slot)
        while True:
            cp = slot.cp
            if cp is None:
                end = self._flushed_end(slot)
                if self._store(slot, BridgeCheckpoint(end)):
                    slot.checked = True
                continue
            if cp.intent is None:
                if slot.checked or self._check_alone(slot):
                    return
                continue  # another member wrote meanwhile (reloaded): look again
            owner = cp.intent.owner
            if owner != self.member_id and self._zk().exists(
                    bridge_member_path(self.group, owner)):
                if self.runtime.wait(0.05):  # a live member's batch: wait for its resolve
                    raise Stopped("stopped while waiting for another bridge member")
                self._load(slot)
                continue
            self._store(slot, self._resolved(slot, cp, cp.intent))

    def _check_alone(self, slot: _Slot) -> bool:
        """Compare the broker's flushed end with ours: past it means another producer.

        Only a conclusion stored by compare-and-set counts: a flushed end past a checkpoint
        that another member of the group has moved on since we read it (its intent, its
        batch) is no other producer.  False: the checkpoint changed (reloaded), look again.
        """
        cp = slot.cp
        assert cp is not None
        end = self._flushed_end(slot)
        if end > cp.end >= 0 and not cp.shared:
            if not self._store(slot, dataclasses.replace(cp, shared=True, end=end)):
                return False
            self._warn_shared(slot, f"flushed end {end} is past the bridge's end {cp.end}")
        elif end > cp.end and cp.shared and not self._store(
                slot, dataclasses.replace(cp, end=end)):
            return False
        slot.checked = True
        return True

    def _warn_shared(self, slot: _Slot, why: str) -> None:
        t = slot.target
        log.warning("0.7 partition %s/%d-%d is written by another producer too (%s): the "
                    "bridge is at-least-once there (a crash may write one batch again)",
                    slot.topic, t.broker_id, t.partition, why)

    def _resolved(self, slot: _Slot, cp: BridgeCheckpoint,
                  intent: BridgeIntent) -> BridgeCheckpoint:
        """``cp`` with ``intent`` decided from the broker's flushed end (module docstring)."""
        stop = intent.start + intent.size
        end = self._flushed_end(slot)
        waited = 0.0
        while end < stop and waited < self.flush_wait:  # the broker flushes on a timer
            if end not in (intent.start, cp.end) and end > intent.start:
                break
            if self.runtime.wait(0.1):
                raise Stopped("stopped while resolving a bridge batch")
            waited += 0.1
            end = self._flushed_end(slot)
        if end == stop and not cp.shared:
            log.info("%s: the batch of %s at %d (%d bytes) landed", slot.path, intent.owner,
                     intent.start, intent.size)
            return cp.landed(intent)
        if end <= intent.start:
            if end < intent.start:
                log.warning("%s: the broker's flushed end %d is behind the bridge's %d (a "
                            "broker lost unflushed data?)", slot.path, end, intent.start)
            log.info("%s: the batch of %s at %d did not land; it is written again",
                     slot.path, intent.owner, intent.start)
            return dataclasses.replace(cp, end=end, intent=None)
        if not cp.shared:
            self._warn_shared(slot, f"flushed end {end}, expected {intent.start} or {stop}")
        return dataclasses.replace(cp, end=end, shared=True, intent=None)

    # -- writing ------------------------------------------------------------------------------

    def encode(self, topic: str, payloads: Sequence[bytes]) -> bytes:
        """The message set(s) for ``payloads``: plain, or wrappers of the topic's codec cut
        at ``max.message.size`` (`encode_sets`); `TargetError` for a message no 0.7 broker
        takes."""
        try:
            return encode_sets(payloads, self.config.codec_for(topic),
                               self.config.max_message_size, topic=topic)
        except MessageTooLargeError as exc:
            raise TargetError(str(exc)) from None

    def write(self, topic: str, index: int, data: bytes, sources: Mapping[str, int]) -> None:
        """Write encoded ``data`` to partition ``index`` of ``topic`` under a checkpoint
        that advances ``sources``; returns once it is confirmed and recorded.  Transient
        failures raise (the caller retries the same call: a batch that landed meanwhile is
        recognised, never written twice)."""
        self.write_batches(((topic, index, data, sources),))

    def write_batches(self, batches: Sequence[tuple[str, int, bytes, Mapping[str, int]]]) -> None:
        """`write` for several 0.7 partitions (distinct ``(topic, index)``) at once.

        Per broker, every batch gets its own intent first; then the broker takes them in one
        confirmed exchange (`confirmed_produce`: the produces pipelined, each followed by its
        offsets request), so the broker never waits for a round trip of ours between two
        partitions; then each confirmed batch is recorded.  Per partition the protocol is
        `write`'s (intent before the produce, landed after its confirmation); a failure
        leaves the unconfirmed intents for `_settle`, as `write` does.

        No deadlock between two members of a group that take turns on shared partitions:
        intents are taken in one global order (checkpoint path) and held only within one
        broker's group, and a retry first settles what its failed attempt left, so a member
        never waits for another while holding an intent the other waits for."""
        wanted = sorted(((self._slot(topic, index), data, sources)
                         for topic, index, data, sources in batches), key=lambda w: w[0].path)
        for slot, _data, _sources in wanted:  # a failed attempt's intents are settled first
            cp = slot.cp
            if cp is not None and cp.intent is not None and cp.intent.owner == self.member_id:
                self._settle(slot)
        by_broker: dict[int, list[tuple[_Slot, bytes, Mapping[str, int]]]] = {}
        for slot, data, sources in wanted:
            by_broker.setdefault(slot.target.broker_id, []).append((slot, data, sources))
        for broker_id, wanted in by_broker.items():
            # the intents right before their broker's exchange: a failure on one broker
            group = self._intend_all(wanted)  # leaves none on the others
            if not group:
                continue
            try:
                accepted = confirmed_produce(self._brokers().conn(broker_id), tuple(
                    ProduceRequest(slot.topic, slot.target.partition, data)
                    for slot, _cp, _intent, data in group))
            except Exception:
                self._brokers().drop(broker_id)
                raise  # the intents stay: `_settle` decides whether each landed
            starts = self._readback.starts(broker_id, [
                (slot.topic, slot.target.partition, intent.start, data, slot.path)
                for slot, _cp, intent, data in group[:accepted]])
            located = [(slot, self._landed(slot, cp, intent, start))
                       for (slot, cp, intent, _data), start
                       in zip(group[:accepted], starts, strict=True)]
            if not self._store_all(located):
                for slot, cp in located:  # none was stored: find the one that changed
                    if not self._store(slot, cp):
                        raise self.runtime.fail(MirrorError(
                            f"{slot.path}: another bridge member resolved this process's "
                            "batch (its ZooKeeper session expired?); stopping"))
            if accepted < len(group):  # the broker rejected that one and closed: after it,
                slot, cp, _intent, _data = group[accepted]  # nothing was read
                self._brokers().drop(broker_id)
                self._store(slot, dataclasses.replace(cp, intent=None))
                raise MirrorError(f"0.7 broker {broker_id} rejected the produce to "
                                  f"{slot.topic}/{slot.target.partition} (closed the "
                                  "connection); retrying")

    def _intend_all(self, wanted: Sequence[tuple[_Slot, bytes, Mapping[str, int]]]
                    ) -> list[tuple[_Slot, BridgeCheckpoint, BridgeIntent, bytes]]:
        """Store the intents of one broker's batches (``wanted`` in path order): all in one
        ZooKeeper multi when no other member wrote meanwhile, else one by one (`_intend`)
        in path order -- the multi stores all or none, so the order that rules out a
        deadlock between members (`write_batches`) holds either way.  Batches whose
        ``sources`` are in already are left out."""
        prepared = []
        for slot, data, sources in wanted:  # holds no intent while it waits for a member's
            ready = self._prepare(slot, data, sources)
            if ready is not None:
                prepared.append((slot, ready[0], ready[1], data))
        if self._store_all([(slot, dataclasses.replace(cp, intent=intent))
                            for slot, cp, intent, _data in prepared]):
            return prepared
        group = []
        for slot, data, sources in wanted:
            intended = self._intend(slot, data, sources)
            if intended is not None:
                group.append((slot, intended[0], intended[1], data))
        return group

    def _intend(self, slot: _Slot, data: bytes, sources: Mapping[str, int]
                ) -> tuple[BridgeCheckpoint, BridgeIntent] | None:
        """Store the intent for ``data`` (step 1); None if ``sources`` are in already (a
        retry of a batch that landed, resolved by `_settle`)."""
        while True:  # another member of the group may write this partition too: take turns
            ready = self._prepare(slot, data, sources)
            if ready is None or self._store(slot, dataclasses.replace(ready[0],
                                                                       intent=ready[1])):
                return ready

    def _prepare(self, slot: _Slot, data: bytes, sources: Mapping[str, int]
                 ) -> tuple[BridgeCheckpoint, BridgeIntent] | None:
        """Settle ``slot``; the checkpoint and the intent ``data`` would get (not stored),
        or None if ``sources`` are in already."""
        self._settle(slot)
        cp = slot.cp
        assert cp is not None
        if all(cp.sources.get(s, -1) >= o for s, o in sources.items()):
            return None
        if cp.shared:  # another producer moves the end: start from the broker's, so
            end = self._flushed_end(slot)  # the intent's range is as near as can be
            if end > cp.end:
                cp = dataclasses.replace(cp, end=end)
        return cp, BridgeIntent(self.member_id, cp.end, len(data), dict(sources))

    def _landed(self, slot: _Slot, cp: BridgeCheckpoint, intent: BridgeIntent,
                start: int) -> BridgeCheckpoint:
        """``cp`` with the batch of ``intent`` recorded at ``start``, where the read-back found
        it (`zkconsumer.mirror.bridge_readback`; invariant: a recorded range holds exactly the
        bytes this bridge wrote); further on than the intent said: another producer writes
        here (shared)."""
        if start == intent.start:
            return cp.landed(intent)
        if not cp.shared:
            self._warn_shared(slot, f"batch landed at {start}, not {intent.start}")
        return dataclasses.replace(cp, shared=True).landed(
            dataclasses.replace(intent, start=start))

    # -- connections --------------------------------------------------------------------------

    def _brokers(self) -> BrokerLinks:
        links = self._links
        if links is None:
            raise MirrorError("the bridge's 0.7 target is not open")
        return links

    def _flushed_end(self, slot: _Slot) -> int:
        t = slot.target
        return self._brokers().flushed_end(slot.topic, t.broker_id, t.partition)
