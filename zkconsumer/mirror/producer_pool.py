"""A small pool of confluent-kafka producers behind the at-least-once ``kafka://`` target.

Why a pool: one idempotent producer is one connection per broker with at most five produce
requests in flight (idempotence's bound, which keeps order per partition across retries);
where that window is the limit -- a distant or slow target -- several producers are not
bound by one window.  ``mirror.target.producers`` sets the pool's size.  It defaults to 1
because on a local tansu (issue 19) the window was not the limit: the mirror is CPU-bound
there, and 4 producers measured about 7 % (100 B) and 11 % (1 KiB) slower than one
(docs/mirror.md).

Invariants:

* **one stream, one producer.**  A stream (the engine passes the source partition of a run)
  is given a producer the first time it is seen -- round-robin over the pool, so a few source
  partitions spread evenly -- and keeps it for the pool's lifetime, resets included.  All of a
  source partition's messages therefore go through one idempotent producer, which keeps their
  order per target partition.  Messages of different streams that meet in one target
  partition (``preserve`` with fewer target partitions, ``hash``) need no mutual order: no
  0.7 consumer ever saw one.
* **every producer is covered.**  `open` builds all of them (and their poll threads), `reset`
  purges and discards all of them (their queued messages fail; the engine resends), `close`
  flushes all of them within one deadline and purges what is left, `flush` waits for all.
* **delivery callbacks** run only inside ``poll``/``flush`` (librdkafka): each producer has its
  own poll thread blocking in ``poll``, so acknowledgements reach the tracker while the mirror
  loop is busy with the source.  (One thread polling every producer in turn measured no
  faster with 4 producers, and needs a short busy wait when idle.)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["ProducerPool"]

log = logging.getLogger(__name__)

#: How long a poll thread blocks in ``poll`` when nothing happens (bounds how long a stop
#: waits for it, not how fast callbacks are served).
_POLL_WAIT = 0.05


class _Slot:
    """One producer and the thread serving its delivery callbacks."""

    __slots__ = ("producer", "stop", "thread")

    def __init__(self, producer: Any, name: str) -> None:
        self.producer = producer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll_loop, name=name, daemon=True)

    def _poll_loop(self) -> None:
        producer, stop = self.producer, self.stop
        while not stop.is_set():
            producer.poll(_POLL_WAIT)

    def halt(self) -> None:
        self.stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5)


class ProducerPool:
    """``size`` producers made by ``build()``, each owning the streams assigned to it (see
    the module docstring).  Thread-safe: `producer` may race `reset` (it then returns a
    producer being discarded, whose purge fails the message: the engine resends)."""

    def __init__(self, size: int, build: Callable[[], Any], *,
                 name: str = "mirror-target-poll") -> None:
        if size < 1:
            raise ValueError(f"a producer pool needs at least one producer, got {size}")
        self.size = size
        self._build = build
        self._name = name
        self._lock = threading.Lock()
        self._slots: tuple[_Slot, ...] = ()
        self._streams: dict[Hashable, int] = {}

    @property
    def opened(self) -> bool:
        return bool(self._slots)

    @property
    def producers(self) -> tuple[Any, ...]:
        """The current producers (empty when not open)."""
        return tuple(s.producer for s in self._slots)

    def open(self) -> None:
        """Build every producer and start its poll thread; nothing if open already.  A
        ``build`` failure discards the producers built so far and propagates."""
        with self._lock:
            if self._slots:
                return
            slots: list[_Slot] = []
            try:
                for i in range(self.size):
                    slots.append(_Slot(self._build(), f"{self._name}-{i}"))
            except BaseException:
                for slot in slots:
                    _discard(slot.producer)
                raise
            for slot in slots:
                slot.thread.start()
            self._slots = tuple(slots)

    def index(self, stream: Hashable) -> int:
        """The pool position ``stream`` is bound to (assigned on first sight, never moved)."""
        idx = self._streams.get(stream)
        if idx is None:
            with self._lock:
                idx = self._streams.setdefault(stream, len(self._streams) % self.size)
        return idx

    def producer(self, stream: Hashable) -> Any:
        """The producer of ``stream``; None when the pool is not open."""
        slots = self._slots
        if not slots:
            return None
        return slots[self.index(stream)].producer

    def _detach(self) -> tuple[_Slot, ...]:
        with self._lock:
            slots, self._slots = self._slots, ()
        return slots

    def reset(self) -> None:
        """Discard every producer: queued messages are purged, their callbacks report the
        failure (served here), and the next `open` builds new producers."""
        for slot in self._detach():
            _discard(slot.producer)
            slot.halt()

    def close(self, timeout: float) -> None:
        """Deliver what is queued in every producer within ``timeout`` in all; purge (and so
        fail) what is left."""
        slots = self._detach()
        for slot in slots:
            slot.halt()
        deadline = time.monotonic() + timeout
        for slot in slots:
            remaining = slot.producer.flush(max(0.0, deadline - time.monotonic()))
            if remaining:
                _discard(slot.producer)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` in all until every producer's queue is delivered."""
        deadline = time.monotonic() + timeout
        left = 0
        for slot in self._slots:
            left += int(slot.producer.flush(max(0.0, deadline - time.monotonic())))
        return left == 0


def _discard(producer: Any) -> None:
    try:
        producer.purge()
        producer.flush(0)  # serves the purged messages' failure callbacks
    except Exception as exc:  # a broken producer must not stop the retry
        log.debug("purging target producer: %r", exc)
