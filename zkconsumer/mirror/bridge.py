"""The bridge: modern Kafka topics into a Kafka 0.7 cluster, nothing lost, no duplicates.

``zkconsumer mirror --from kafka://HOST:PORT --group G --topic T --to kafka07://ZK`` runs one
`Bridge`: a confluent-kafka consumer group member on the source (``isolation.level =
read_committed``, auto-commit off) and a `zkconsumer.mirror.bridge_target.Kafka07Sink` on the
target.  One thread, in rounds: poll up to ``mirror.poll.batch`` records, route each to a
partition of its 0.7 topic, write every 0.7 partition's share as one confirmed batch under a
ZooKeeper checkpoint, then -- only then -- let the source offsets move (committed every
``mirror.commit.interval.ms``, and on every rebalance and at shutdown).  A round is written
by a writer thread while the loop reads the next (`zkconsumer.mirror.pipeline`: one round in
the writer, one handed over, in order); polls read while the writer is busy merge into the
round handed over, up to ``mirror.bridge.round.bytes`` encoded bytes, so a round's fixed cost
(compare-and-sets, the wait for the 0.7 broker's flush) is spread over what arrived
meanwhile.  Rebalances, claims and the final commit wait until the writer is idle.

Guarantees (docs/mirror.md, "The bridge"):

* **Nothing lost.**  A source offset is committed only after the 0.7 broker confirmed every
  record before it (a round is written whole before its offsets count).
* **No duplicates when the bridge is the only writer of its 0.7 partitions.**  Each 0.7
  partition's checkpoint records, per source partition, the next source offset not yet in
  that 0.7 partition.  A claimed source partition (`_claim`) reads them and drops records
  routed to a 0.7 partition that has them already -- the source's committed offset may be
  behind after a crash.  That needs *deterministic* routing: ``preserve`` (source partition
  ``p`` -> 0.7 partition ``p % n``), ``hash`` (the 0.7 producer's Java ``hashCode`` of the
  record key, of the value for a record without key) and ``round-robin`` (``(offset + p) %
  n``: even and repeatable).  Where another producer writes a 0.7 partition too, the sink
  says so and is at-least-once there (bridge_target.py).
* **No loops.**  Records carrying the forward mirror's provenance header ``zkc.source`` came
  from 0.7: they are skipped (counted as ``looped``).  The forward mirror skips what a bridge
  wrote into 0.7 (`zkconsumer.mirror.loopguard`).

Lanes (one per owned source partition) follow `zkconsumer.mirror.lanes`; stop, retry and
backoff are the shared `zkconsumer.mirror.runtime.Runtime`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zkconsumer.errors import (
    ConfigurationError,
    MirrorError,
    TargetError,
    ZooKeeperUnreachableError,
)
from zkconsumer.mirror.bridge_source import SourceSpec
from zkconsumer.mirror.checkpoints import HEADER_SOURCE
from zkconsumer.mirror.config import MirrorConfig, Partitioning
from zkconsumer.mirror.lanes import LaneState, LaneStatus
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.pipeline import Pipeline
from zkconsumer.mirror.runtime import Every, Runtime, RuntimeEngine, Stopped, close_all
from zkconsumer.producer.partitioning import PartitionChooser
from zkconsumer.protocol import default_partition
from zkconsumer.protocol.message import HEADER_V1

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

__all__ = ["Bridge", "SourceSpec"]

log = logging.getLogger(__name__)

@dataclass
class _Batch:
    """One 0.7 partition's share of a round, encoded on the loop thread (so the writer's
    critical path is only ZooKeeper and the broker): the message set(s) -- one part per
    merged poll, joined by the writer --, how many messages and payload bytes, and the
    source positions it advances."""

    parts: list[bytes]
    count: int
    size: int
    sources: dict[str, int]

    @property
    def nbytes(self) -> int:
        return sum(map(len, self.parts))


@dataclass
class _Round:
    """One or more polls' records, routed: per (0.7 topic, partition index) its `_Batch`;
    the lanes' positions once all of it is written; its encoded size."""

    batches: dict[tuple[str, int], _Batch]
    moved: dict[_Lane, int]
    nbytes: int
    looped: int = 0  # records skipped as the forward mirror's (counted once: `count_routing`)
    skipped: int = 0  # records skipped as in 0.7 already

    def count_routing(self, stats: MirrorStats) -> None:
        """Add the records this round's routing skipped to ``stats`` (once per poll routed:
        a poll cut into rounds is routed again, and only the final rounds count)."""
        if self.looped:
            stats.add("looped", self.looped)
        if self.skipped:
            stats.add("skipped", self.skipped)

    def merged(self, later: _Round, limit: int) -> _Round | None:
        """This round followed by ``later`` as one round (`Pipeline`'s ``merge``), or None
        if that would pass ``limit`` encoded bytes.  Writing the result has the effects of
        writing both in order: each partition's sets are appended (a 0.7 message set is a
        concatenation of messages), and later source positions replace earlier ones (they
        only grow)."""
        if self.nbytes + later.nbytes > limit:
            return None
        for key, b in later.batches.items():
            mine = self.batches.get(key)
            if mine is None:
                self.batches[key] = b
            else:
                mine.parts.extend(b.parts)
                mine.count += b.count
                mine.size += b.size
                mine.sources.update(b.sources)
        self.moved.update(later.moved)
        self.nbytes += later.nbytes
        return self


class _Lane:
    """One owned source partition: its routing, what 0.7 has already, where it is."""

    __slots__ = ("done", "fixed", "partition", "skip", "source", "status", "target", "topic")

    def __init__(self, topic: str, partition: int, target: str) -> None:
        self.topic = topic
        self.partition = partition
        self.target = target
        self.source = f"{topic}/{partition}"
        self.status = LaneStatus(self.source)
        self.skip: list[int] = []  # per 0.7 partition index: next source offset not in it
        self.fixed: int | None = None  # preserve: the one 0.7 partition
        self.done = -1  # next source offset whose predecessors are all in 0.7


class Bridge(RuntimeEngine):
    """One bridge process (module docstring)."""

    def __init__(self, config: MirrorConfig, source: SourceSpec, *,
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        from zkconsumer.mirror.bridge_target import Kafka07Sink

        if config.target.kind != "kafka07" or config.target.zk_connect is None:
            raise ConfigurationError("--from kafka://... needs --to kafka07://ZK[/chroot]")
        self.config = config
        self.source = source
        self.stats = MirrorStats()
        self.runtime = Runtime(config, self.stats, str(config.target), clock=clock)
        self.sink = Kafka07Sink(config.target.zk_connect, config.target_options, source.group,
                                self.runtime, flush_wait=config.flush_wait_ms / 1000.0)
        self.progress = progress
        self._chooser = PartitionChooser("hash")
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self._counts: dict[str, int] = {}
        self._committed: dict[tuple[str, int], int] = {}
        self._consumer: Consumer | None = None
        self._started = False
        self._pipeline: Pipeline[_Round] | None = None

    # -- control (stop, run: `RuntimeEngine`) --------------------------------------------------

    @property
    def lanes(self) -> dict[tuple[str, int], _Lane]:
        return self._lanes

    def _start(self) -> None:
        from confluent_kafka import Consumer

        # a 0.7 ZooKeeper that does not answer yet is waited for as by the forward mirror
        # (`Runtime.reach_zookeeper`); then the brokers, as any target, by `retrying`
        self.runtime.retrying(
            "connecting to the 0.7 cluster",
            lambda: self.runtime.reach_zookeeper("connecting to the 0.7 cluster", self.sink),
            final=(ConfigurationError, TargetError, ZooKeeperUnreachableError))
        self._consumer = Consumer(self.source.consumer_config())
        topics = list(self.source.topics) or [f"^{self.source.pattern}"]
        limit = self.config.bridge_round_bytes
        self._pipeline = Pipeline(self._write_round, self.runtime.fail, name="bridge-writer",
                                  merge=lambda queued, later: queued.merged(later, limit))
        self._consumer.subscribe(topics, on_assign=self._on_assign,
                                 on_revoke=self._on_revoke, on_lost=self._on_lost)
        self._started = True

    # -- rebalance (called from consume(), on the loop thread) ----------------------------------

    def _idle(self) -> None:
        """Wait for the writer: the sink and the lanes' positions are ours then."""
        if self._pipeline is not None:
            self._pipeline.idle()

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._idle()
        try:
            for tp in partitions:
                self._claim(tp.topic, tp.partition)
        except Exception as exc:  # librdkafka swallows callback errors: make them fatal
            if not isinstance(exc, Stopped):
                self.runtime.fail(exc)
        log.info("bridge assigned %s", sorted(f"{tp.topic}/{tp.partition}" for tp in partitions))

    def _claim(self, topic: str, partition: int) -> None:
        lane = _Lane(topic, partition, self.config.target_topic(topic))
        n = self._count(lane.target)
        lane.skip = [self.runtime.retrying(
            f"reading the bridge checkpoint of {lane.target} partition {i}",
            lambda i=i: self.sink.checkpoint(lane.target, i),  # type: ignore[misc]
            final=(ConfigurationError, TargetError)).sources.get(lane.source, -1)
            for i in range(n)]
        if self.config.partitioning is Partitioning.PRESERVE:
            lane.fixed = partition % n
        self._lanes[(topic, partition)] = lane
        lane.status.move(LaneState.ACTIVE, "checkpoints read")
        ahead = max(lane.skip)
        log.info("%s: claimed; 0.7 has its records up to source offset %s (those are "
                 "skipped)", lane.source, "none" if ahead < 0 else ahead - 1)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._idle()
        self._commit(sync=True)
        self._release(partitions, "revoked")

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._idle()
        self._release(partitions, "lost")

    def _release(self, partitions: list[TopicPartition], why: str) -> None:
        for tp in partitions:
            lane = self._lanes.pop((tp.topic, tp.partition), None)
            if lane is not None:
                lane.status.move(LaneState.RELEASED, why)
            self._committed.pop((tp.topic, tp.partition), None)

    def _count(self, topic: str) -> int:
        n = self._counts.get(topic)
        if n is None:
            n = self._counts[topic] = len(self.runtime.retrying(
                f"reading the 0.7 partitions of {topic}", lambda: self.sink.partitions(topic),
                final=(ConfigurationError,)))
        return n

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        cfg = self.config
        commit = Every(cfg.commit_interval_ms / 1000.0, self.runtime.clock)
        progress = Every(cfg.progress_interval_ms / 1000.0, self.runtime.clock)
        assert self._consumer is not None  # _start made it
        consume = self._consumer.consume
        while not self.runtime.stopping:
            self.runtime.check()
            records = consume(cfg.poll_batch, 0.1)
            if records:
                assert self._pipeline is not None
                for round_ in self._rounds(records):
                    self._pipeline.submit(round_)
            if commit.due():
                self._commit(sync=False)
            if self.progress is not None and progress.due():
                self.progress(self.stats.snapshot())

    def _rounds(self, records: Sequence[Any]) -> list[_Round]:
        """One poll's records as rounds of at most ``mirror.bridge.round.bytes`` encoded bytes
        each (or one record): usually one round; a poll of large records is cut by the
        records' sizes and each piece routed again (halved if it still does not fit).  Why: a
        round is one produce request per 0.7 partition, and a broker closes the connection on
        a request over its ``max.socket.request.bytes`` (100 MiB by default) -- 500 records of
        1 MB were one request, retried forever.  Rounds merge only up to the same bound
        (`_Round.merged`), so no request is larger.  Routing is a pure function of the record,
        so a piece routes as it did within the whole poll."""
        round_ = self._route_round(records)
        if round_ is None:
            return []
        limit = self.config.bridge_round_bytes
        if round_.nbytes <= limit or len(records) == 1:
            round_.count_routing(self.stats)
            return [round_]
        pieces: list[Sequence[Any]] = []
        start = size = 0
        for i, m in enumerate(records):  # len(Message): its value's size
            n = len(m) + HEADER_V1.size  # + the 0.7 framing
            if size + n > limit and i > start:
                pieces.append(records[start:i])
                start, size = i, 0
            size += n
        pieces.append(records[start:])
        if len(pieces) == 1:  # sizes say it fits, the encoding does not: halve it
            half = len(records) // 2
            pieces = [records[:half], records[half:]]
        return [r for piece in pieces for r in self._rounds(piece)]

    def _route_round(self, records: Sequence[Any]) -> _Round | None:
        """One poll's records routed: each 0.7 partition's share becomes one batch (module
        docstring); None if the poll held nothing of an active lane.

        ``records`` are confluent-kafka ``Message``s, typed `Any` here: its stubs make every
        accessor Optional, while a consumed record without ``error()`` has them all (a
        check per accessor would be the hot loop's biggest cost)."""
        groups: dict[tuple[str, int], tuple[list[bytes], dict[str, int]]] = {}
        moved: dict[_Lane, int] = {}
        lanes = self._lanes
        looped = skipped = 0
        current: tuple[str, int] | None = None  # the (topic, partition) of the run so far
        lane: _Lane | None = None  # its lane while ACTIVE, else None
        run: list[bytes] = []  # preserve: the run's group's values and sources
        sources: dict[str, int] = {}
        fixed = skip = -1
        o = kept = -1  # the run's last record, and its last record kept
        for m in records:  # a poll is runs of one partition's records: per run, not per record
            err = m.error()
            if err is not None:
                self._source_error(err)
                continue
            tp = (m.topic(), m.partition())
            if tp != current:
                if lane is not None and o >= 0:
                    moved[lane] = o + 1
                    if kept >= 0:
                        sources[lane.source] = kept + 1
                current, o, kept = tp, -1, -1
                lane = lanes.get(tp)
                if lane is not None and lane.status.state is not LaneState.ACTIVE:
                    lane = None
                if lane is not None and lane.fixed is not None:
                    fixed, skip = lane.fixed, lane.skip[lane.fixed]
                    group = groups.get((lane.target, fixed))
                    if group is None:
                        group = groups[(lane.target, fixed)] = ([], {})
                    run, sources = group
            if lane is None:
                continue
            o = m.offset()
            headers = m.headers()
            if headers and any(h[0] == HEADER_SOURCE for h in headers):
                looped += 1  # the forward mirror wrote it: it came from 0.7
                continue
            value = m.value() or b""
            if lane.fixed is not None:
                if o < skip:
                    skipped += 1  # in 0.7 already (written before a crash)
                    continue
                run.append(value)
                kept = o
                continue
            index = self._route(lane, m, value)
            if o < lane.skip[index]:
                skipped += 1
                continue
            group = groups.get((lane.target, index))
            if group is None:
                group = groups[(lane.target, index)] = ([], {})
            group[0].append(value)
            group[1][lane.source] = o + 1
        if lane is not None and o >= 0:
            moved[lane] = o + 1
            if kept >= 0:
                sources[lane.source] = kept + 1
        groups = {key: group for key, group in groups.items() if group[0]}
        if not moved:
            return None
        encode = self.sink.encode
        batches = {key: _Batch([encode(key[0], payloads)], len(payloads),
                               sum(map(len, payloads)), sources)
                   for key, (payloads, sources) in groups.items()}
        return _Round(batches, moved, sum(b.nbytes for b in batches.values()), looped, skipped)

    def _write_round(self, round_: _Round) -> None:
        """The writer thread: every batch of the round (one confirmed exchange per 0.7
        broker, `Kafka07Sink.write_batches`), then the lanes' positions move."""
        count = sum(b.count for b in round_.batches.values())
        self.stats.add("sent", count)
        batches = [(topic, index, b"".join(b.parts), b.sources)  # one part: no copy
                   for (topic, index), b in round_.batches.items()]
        self.runtime.retrying(f"writing {count} messages to 0.7",
                              lambda: self.sink.write_batches(batches),
                              final=(ConfigurationError, TargetError))
        for (topic, _index), b in round_.batches.items():
            self.stats.mirrored(topic, b.count, b.size)
            self.stats.add("log_bytes", b.nbytes)
        for lane, done in round_.moved.items():
            lane.done = done

    def _route(self, lane: _Lane, m: Any, value: bytes) -> int:
        n = len(lane.skip)
        if self.config.partitioning is Partitioning.HASH:
            key = m.key()
            if key:
                return self._chooser.index(lane.target, bytes(key), n)
            return default_partition(value, n)
        return (int(m.offset()) + lane.partition) % n  # round-robin, repeatable

    def _source_error(self, err: KafkaError) -> None:
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.fatal():
            self.runtime.fail(MirrorError(f"source consumer: {err.str()}"))
        elif err.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED):
            self.runtime.fail(MirrorError(f"source: {err.str()}"))
        else:
            log.warning("source consumer: %s", err.str())

    # -- commits and lag ----------------------------------------------------------------------

    def _commit(self, *, sync: bool) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        offsets = [TopicPartition(lane.topic, lane.partition, lane.done)
                   for key, lane in self._lanes.items()
                   if lane.done >= 0 and self._committed.get(key) != lane.done]
        if not offsets or self._consumer is None:
            return
        try:
            if sync:
                self._consumer.commit(offsets=offsets, asynchronous=False)
            else:
                self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:  # the next interval tries again
            log.warning("source offset commit failed (will retry): %s", exc.args[0].str())
            return
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset
        self.stats.add("commits")

    def lag(self) -> int | None:
        """Source records not yet bridged (high watermark - position), None until known."""
        from confluent_kafka import TopicPartition

        consumer = self._consumer
        if consumer is None or not self._lanes:
            return None
        total = 0
        try:
            for (topic, partition), lane in list(self._lanes.items()):
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                            cached=True)
                if high < 0:
                    return None
                total += max(0, high - max(lane.done, 0))
        except Exception:  # the consumer is closing or mid-rebalance: unknown for now
            return None
        return total

    # -- shutdown -----------------------------------------------------------------------------

    def _shutdown(self) -> None:
        try:
            if self._pipeline is not None:
                self._pipeline.close()  # finishes the rounds handed over (unless stopping)
            if self._started:  # lane.done only counts whole, written rounds: always safe
                self._commit(sync=True)
        finally:
            consumer, self._consumer = self._consumer, None
            close_all([consumer.close] if consumer is not None else [])
            for lane in self._lanes.values():
                lane.status.move(LaneState.RELEASED, "shutdown")
            self._lanes.clear()
            close_all([self.sink.close])
