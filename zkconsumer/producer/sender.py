"""`Dispatcher`: route chunks to partitions, encode one set per (topic, partition), send, retry.

Used by both modes: a sync ``send()`` dispatches its one chunk on the caller's thread; the
async sender thread dispatches a whole batch, or several full batches of a backlog at once
(`Dispatcher.send_batches`).  One attempt:

1. route every chunk (one ``send()``, or a run of single-message sends routed one by one) to
   a partition of its topic's list (`PartitionChooser`: keyed -> Java hash, unkeyed ->
   random / round-robin), skipping brokers that failed in earlier attempts of this dispatch;
2. per broker, collate chunks per (topic, partition) and batch into ONE message set each
   (compressed with the topic's codec), so a batch -- or a backlog of batches -- costs one
   request per broker: PRODUCE for one set, MULTIPRODUCE for several, in batch order (or,
   when ``confirm`` is on, pipelined confirmed produces);
3. record what the broker took and what failed.

Failure policy: a connection failure or a confirmed-produce rejection is *retriable*: the
chunks go back through routing (another live partition, the failed broker excluded), after
``retry.backoff.ms``, up to ``num.retries`` times, with a ZooKeeper refresh requested so a dead
broker drops out of the lists.  What still fails is returned to the caller with its last
error -- never dropped silently.  Unconfirmed sends that fail half-way may be retried although
the broker stored part of them: delivery is at-least-once.

Size rules: sets are cut at `MAX_SET_BYTES` raw bytes (compressed topics: at
``max.message.size`` raw bytes, so the wrapper almost always fits without trial compression);
a wrapper that still exceeds ``max.message.size`` is halved until it fits; a single message
that cannot fit fails permanently with `MessageTooLargeError`.  Requests are cut at
`MAX_REQUEST_BYTES`, far below the broker's 100 MB ``max.socket.request.bytes``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from zkconsumer.client.produce import confirmed_produce, multiproduce
from zkconsumer.errors import (
    BrokerConnectionError,
    MessageTooLargeError,
    NoBrokersAvailableError,
    ProduceRejectedError,
    ZkConsumerError,
    ZooKeeperError,
)
from zkconsumer.producer.cluster import ClusterView
from zkconsumer.producer.config import ProducerConfig
from zkconsumer.producer.encoding import encode_set
from zkconsumer.producer.partitioning import BrokerPartition, PartitionChooser
from zkconsumer.producer.pool import ConnectionPool
from zkconsumer.producer.queue import Chunk
from zkconsumer.producer.stats import ProducerStats
from zkconsumer.protocol import Compression, ProduceRequest

__all__ = ["MAX_REQUEST_BYTES", "MAX_SET_BYTES", "Dispatcher", "Failure"]

log = logging.getLogger(__name__)

#: Largest message set we build in one piece (raw bytes).  About 1 MiB per request keeps the
#: broker and the producer working in parallel (measured: 5 MiB requests were 2x slower).
MAX_SET_BYTES = 1024 * 1024
#: Largest request (sum of its sets) we write in one piece.
MAX_REQUEST_BYTES = 2 * 1024 * 1024
_WRAPPER_HEADER = 10  # int32 length + magic + attributes + crc before the wrapper's payload

Failure = tuple[Chunk, Exception]
#: request, chunks, messages, payload bytes, batch number
_Part = tuple[ProduceRequest, list[Chunk], int, int, int]
#: topic, partition, batch number: one message set (or more, when cut by size) each
_SetKey = tuple[str, int, int]


class _Retry(Exception):
    """Internal marker: these chunks may be retried (carries the cause)."""


class Dispatcher:
    def __init__(self, config: ProducerConfig, view: ClusterView, pool: ConnectionPool,
                 stats: ProducerStats, chooser: PartitionChooser, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.view = view
        self.pool = pool
        self.stats = stats
        self.chooser = chooser
        self._sleep = sleep
        #: Set by ``Producer.close`` when its deadline passed: fail what is left, no retries.
        self.aborted = False

    def send(self, chunks: Sequence[Chunk]) -> list[Failure]:
        """Deliver ``chunks`` (one batch) with retries; return those not delivered."""
        return self.send_batches([chunks])

    def send_batches(self, batches: Sequence[Sequence[Chunk]]) -> list[Failure]:
        """Deliver several batches at once: each batch makes its own message set per
        (topic, partition), and the sets of all of them share the requests to a broker
        (in batch order, so each partition still gets its messages in order)."""
        pending = [(n, chunk) for n, batch in enumerate(batches) for chunk in batch]
        excluded: set[int] = set()
        final: list[Failure] = []
        attempt = 0
        while pending:
            retry: list[tuple[int, Chunk, Exception]] = []
            for n, chunk, exc in self._attempt(pending, excluded):
                if isinstance(exc, _Retry):
                    retry.append((n, chunk, exc))
                else:
                    final.append((chunk, exc))
            if not retry:
                break
            if attempt >= self.config.num_retries or self.aborted:
                final.extend((c, _cause(e)) for _, c, e in retry)
                break
            attempt += 1
            retried = sum(len(c.payloads) for _, c, _ in retry)
            self.stats.add(retried=retried)
            log.warning("retrying %d message(s) (attempt %d of %d): %s", retried, attempt,
                        self.config.num_retries, _cause(retry[0][2]))
            self.view.request_refresh()
            if self.config.retry_backoff_ms:
                self._sleep(self.config.retry_backoff_ms / 1000.0)
            pending = [(n, c) for n, c, _ in retry]
        return final

    # -- one attempt -------------------------------------------------------------------------

    def _attempt(self, items: list[tuple[int, Chunk]],
                 excluded: set[int]) -> list[tuple[int, Chunk, Exception]]:
        """One try of ``(batch number, chunk)`` items; failures keep their batch number."""
        failures: list[tuple[int, Chunk, Exception]] = []
        routes: dict[int, dict[_SetKey, list[Chunk]]] = {}
        candidates: dict[str, list[BrokerPartition] | ZkConsumerError] = {}
        for n, chunk in items:
            topic_candidates = candidates.get(chunk.topic)
            if topic_candidates is None:  # once per topic and attempt, not per chunk
                try:
                    topic_candidates = self._candidates(chunk.topic, excluded)
                except ZkConsumerError as exc:
                    topic_candidates = exc
                candidates[chunk.topic] = topic_candidates
            if isinstance(topic_candidates, ZkConsumerError):
                failures.append((n, chunk, _Retry(topic_candidates)))
                continue
            routed = self._route(chunk, topic_candidates)
            for bp, part in routed:
                routes.setdefault(bp.broker_id, {}).setdefault((chunk.topic, bp.partition, n),
                                                               []).append(part)
        for broker_id, sets in routes.items():
            failures.extend(self._send_broker(broker_id, sets, excluded))
        return failures

    def _candidates(self, topic: str, excluded: set[int]) -> list[BrokerPartition]:
        """The partitions ``topic`` may go to in this attempt (failed brokers left out
        unless none is left)."""
        try:
            partitions = self.view.partitions(topic)
        except ZooKeeperError as exc:
            raise NoBrokersAvailableError(
                f"cannot read the partitions of {topic!r} from ZooKeeper: {exc}") from exc
        candidates = [p for p in partitions if p.broker_id not in excluded] or list(partitions)
        if not candidates:
            raise NoBrokersAvailableError(f"no live broker for topic {topic!r}")
        return candidates

    def _route(self, chunk: Chunk, candidates: list[BrokerPartition]
               ) -> list[tuple[BrokerPartition, Chunk]]:
        """Where ``chunk`` goes: one partition, or -- for a run of single-message sends that
        route independently (unkeyed, or ``partitioner=random``) over several candidates --
        one decision per message, as if each ``send()`` had been routed alone; each part keeps
        the order of its messages."""
        n = len(candidates)
        if (not chunk.singles or n == 1 or len(chunk.payloads) == 1
                or (chunk.key is not None and self.chooser.strategy != "random")):
            return [(self.chooser.choose(chunk.topic, chunk.key, candidates), chunk)]
        index = self.chooser.index
        by_index: dict[int, list[bytes]] = {}
        for payload in chunk.payloads:
            by_index.setdefault(index(chunk.topic, chunk.key, n), []).append(payload)
        return [(candidates[i], chunk._replace(payloads=ps)) for i, ps in by_index.items()]

    def _send_broker(self, broker_id: int, sets: dict[_SetKey, list[Chunk]],
                     excluded: set[int]) -> list[tuple[int, Chunk, Exception]]:
        failures: list[tuple[int, Chunk, Exception]] = []
        parts: list[_Part] = []
        for (topic, partition, batch), chunks in sets.items():
            codec = self.config.codec_for(topic)
            too_large: list[Failure] = []
            for data, set_chunks in self._encode(codec, chunks, too_large):
                n = sum(len(c.payloads) for c in set_chunks)
                # a plain set is its payloads plus a 10-byte header each
                nbytes = (len(data) - _WRAPPER_HEADER * n if codec == Compression.NONE
                          else sum(sum(map(len, c.payloads)) for c in set_chunks))
                parts.append((ProduceRequest(topic, partition, data), set_chunks, n, nbytes,
                              batch))
            failures.extend((batch, c, e) for c, e in too_large)
        if not parts:
            return failures
        address = self.view.broker(broker_id)
        if address is None:
            err = NoBrokersAvailableError(f"broker {broker_id} is not registered")
            excluded.add(broker_id)
            return failures + [(part[4], c, _Retry(err)) for part in parts for c in part[1]]
        try:
            conn = self.pool.get(broker_id, *address)
        except BrokerConnectionError as exc:  # the pool is closed
            return failures + [(part[4], c, _Retry(exc)) for part in parts for c in part[1]]
        for group in _request_groups(parts):
            requests = [p[0] for p in group]
            try:
                if self.config.confirm:
                    accepted = confirmed_produce(conn, requests)
                else:
                    multiproduce(conn, requests)
                    accepted = len(group)
            except BrokerConnectionError as exc:
                log.warning("produce to broker %s failed: %s", broker_id, exc)
                excluded.add(broker_id)
                failures.extend((part[4], c, _Retry(exc)) for part in group for c in part[1])
                continue
            finally:
                self.pool.after_request(conn)
            ok = group[:accepted]
            self.stats.add(requests=1 if not self.config.confirm else len(group),
                           messages_sent=sum(p[2] for p in ok),
                           bytes_sent=sum(p[3] for p in ok),
                           set_bytes=sum(len(p[0].messages) for p in ok))
            if accepted < len(group):
                bad = group[accepted][0]
                exc2 = ProduceRejectedError(
                    f"broker {broker_id} rejected the produce to {bad.topic}/{bad.partition} "
                    f"and closed the connection", topic=bad.topic, partition=bad.partition)
                log.warning("%s; %d later part(s) not written", exc2, len(group) - accepted - 1)
                excluded.add(broker_id)
                failures.extend((part[4], c, _Retry(exc2)) for part in group[accepted:]
                                for c in part[1])
        return failures

    def _encode(self, codec: Compression, chunks: list[Chunk],
                failures: list[Failure]) -> list[tuple[bytes, list[Chunk]]]:
        """Sets for ``chunks`` (all one topic/partition): one set unless too large.

        Raw size is checked first (cheap, ``len`` only) so a big batch is cut into pieces of at
        most `MAX_SET_BYTES` -- for a compressed topic at most ``max.message.size`` raw bytes,
        which nearly always compress to a wrapper that fits -- before anything is compressed.
        A wrapper that still does not fit (incompressible data) is halved and re-encoded.
        """
        limit = MAX_SET_BYTES
        if codec != Compression.NONE:
            limit = min(limit, self.config.max_message_size)
        pieces = _cut(chunks, limit)
        out: list[tuple[bytes, list[Chunk]]] = []
        for piece in pieces:
            payloads = (piece[0].payloads if len(piece) == 1
                        else [p for c in piece for p in c.payloads])
            if codec == Compression.NONE:
                out.append((encode_set(payloads), piece))
                continue
            data = encode_set(payloads, codec)
            if len(data) - _WRAPPER_HEADER <= self.config.max_message_size:
                out.append((data, piece))
            elif len(payloads) > 1:
                out.extend(self._encode_halves(codec, piece, failures))
            else:
                size = len(data) - _WRAPPER_HEADER
                failures.append((piece[0], MessageTooLargeError(
                    f"a {codec.name.lower()} wrapper of {size} bytes exceeds "
                    f"max.message.size={self.config.max_message_size}",
                    topic=piece[0].topic, size=size)))
        return out

    def _encode_halves(self, codec: Compression, chunks: list[Chunk],
                       failures: list[Failure]) -> list[tuple[bytes, list[Chunk]]]:
        if len(chunks) > 1:
            half = len(chunks) // 2
            halves = [chunks[:half], chunks[half:]]
        else:
            c = chunks[0]
            half = len(c.payloads) // 2
            halves = [[c._replace(payloads=c.payloads[:half])],
                      [c._replace(payloads=c.payloads[half:])]]
        return [s for h in halves for s in self._encode(codec, h, failures)]


def _cut(chunks: list[Chunk], limit: int) -> list[list[Chunk]]:
    """Cut ``chunks`` into pieces whose raw set size (payloads + 10 bytes each) is at most
    ``limit`` (a single message may exceed it).  Chunks are split between messages only when
    one chunk alone is too big."""
    sizes = [sum(map(len, c.payloads)) + 10 * len(c.payloads) for c in chunks]
    if sum(sizes) <= limit:
        return [chunks] if chunks else []
    pieces: list[list[Chunk]] = [[]]
    room = limit
    for chunk, size in zip(chunks, sizes, strict=True):
        if size <= room:
            pieces[-1].append(chunk)
            room -= size
            continue
        if size <= limit:  # fits a piece of its own
            pieces.append([chunk])
            room = limit - size
            continue
        start = 0  # split this chunk between messages
        for i, p in enumerate(chunk.payloads):
            need = len(p) + 10
            if need > room and (i > start or pieces[-1]):
                if i > start:
                    pieces[-1].append(chunk._replace(payloads=chunk.payloads[start:i]))
                pieces.append([])
                room = limit
                start = i
            room -= need
        pieces[-1].append(chunk._replace(payloads=chunk.payloads[start:]))
    return [p for p in pieces if p]


def _request_groups(parts: list[_Part]) -> list[list[_Part]]:
    """Split the parts for one broker into requests of at most `MAX_REQUEST_BYTES`."""
    groups: list[list[_Part]] = [[]]
    size = 0
    for part in parts:
        n = len(part[0].messages)
        if groups[-1] and size + n > MAX_REQUEST_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(part)
        size += n
    return groups


def _cause(exc: Exception) -> Exception:
    """The real error behind a `_Retry` marker."""
    if isinstance(exc, _Retry) and exc.args and isinstance(exc.args[0], Exception):
        return exc.args[0]
    return exc
