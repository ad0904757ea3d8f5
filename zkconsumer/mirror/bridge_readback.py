"""Finding a confirmed bridge batch in what a 0.7 broker serves back.

`zkconsumer.mirror.bridge_target.Kafka07Sink` records a batch's byte range only where it
*landed*: another producer's sets may have landed between the end the bridge knew and its
produce, and a range off by them would make the forward mirror (`zkconsumer.mirror.loopguard`)
skip their messages and copy the bridge's back.  So the partition is read back from the
intent's start and scanned, entry by entry (a 0.7 message set is a sequence of
``int32 size + message``), for the batch's bytes.

Invariant: a position returned is the start of an entry of the fetched data at which the
batch's bytes follow, byte for byte -- never a guess; "not found yet" returns how far the
scan got over whole entries, so the next read starts at an entry boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from zkconsumer.errors import MirrorError
from zkconsumer.mirror.bridge_links import BrokerLinks
from zkconsumer.mirror.runtime import Runtime, Stopped
from zkconsumer.protocol import FetchRequest

__all__ = ["Readback", "find_batch"]


def find_batch(raw: bytes, data: bytes) -> tuple[int | None, int]:
    """Scan ``raw`` (message sets fetched from an entry boundary) for ``data``.

    Returns ``(i, i)`` when ``data`` starts at ``raw[i]``; else ``(None, n)``: the first ``n``
    bytes are whole entries that do not start it, and the rest is cut (by the fetch size, or
    not all flushed yet) or could be its beginning -- read on from ``n``."""
    i = 0
    while i + 4 <= len(raw):
        if len(raw) - i < len(data) and data.startswith(raw[i:]):
            break  # maybe ours, cut short: read on from here
        if raw.startswith(data, i):  # compared in place: no copy per entry
            return i, i
        size = 4 + int.from_bytes(raw[i:i + 4], "big")
        if i + size > len(raw):
            break
        i += size
    return None, i


class Readback:
    """Where confirmed batches landed, read back over the sink's reader connections
    (`BrokerLinks`); only flushed data is served, so a batch not (all) readable yet is waited
    for, up to ``flush_wait`` seconds (``mirror.bridge.flush.wait.ms``)."""

    def __init__(self, links: Callable[[], BrokerLinks], runtime: Runtime,
                 flush_wait: float) -> None:
        self._links = links
        self.runtime = runtime
        self.flush_wait = flush_wait

    def starts(self, broker_id: int, batches: Sequence[tuple[str, int, int, bytes, str]]
               ) -> list[int]:
        """Per ``(topic, partition, intended start, data, name)`` of one broker: where
        ``data`` starts.  One multifetch reads them all back (one round trip); a batch not
        wholly in it yet is read on alone (`start`)."""
        links = self._links()
        try:
            parts = links.reader(broker_id).multifetch([
                FetchRequest(topic, partition, start, len(data) + 65536)
                for topic, partition, start, data, _name in batches])
        except Exception:
            links.drop(broker_id)
            raise  # the intents stay: the sink's settle decides whether each landed
        out = []
        for (topic, partition, start, data, name), part in zip(batches, parts, strict=True):
            found, scanned = (None, 0) if part.error else find_batch(part.messages, data)
            out.append(start + found if found is not None else
                       self.start(broker_id, topic, partition, start + scanned, data, name,
                                  intended=start))
        return out

    def start(self, broker_id: int, topic: str, partition: int, pos: int, data: bytes,
              name: str, *, intended: int) -> int:
        """Where ``data`` starts, reading ``topic``/``partition`` from ``pos`` (an entry
        boundary at or after ``intended``) until it is found byte for byte."""
        links = self._links()
        waited = 0.0
        while True:
            try:
                raw = links.reader(broker_id).fetch(topic, partition, pos,
                                                    max_size=len(data) + 65536).messages
            except Exception:
                links.drop(broker_id)
                raise  # the intent stays: the sink's settle decides whether it landed
            found, scanned = find_batch(raw, data)
            if found is not None:
                return pos + found
            pos += scanned
            if scanned == 0:  # nothing new flushed yet past pos
                if waited >= self.flush_wait:
                    raise MirrorError(f"{name}: the confirmed batch at or after {intended} "
                                      f"was not readable within {self.flush_wait}s; retrying")
                if self.runtime.wait(0.02):
                    raise Stopped("stopped while locating a bridge batch")
                waited += 0.02
