"""`ProducerStats`: counters of one `Producer`, safe to read from any thread.

Counters only grow.  ``messages_sent``/``bytes_sent`` count payloads (not wire bytes) the
producer handed to a broker -- *confirmed* ones when ``confirm`` is on; ``failed`` counts
messages given up on after the retries (reported to the caller, never silently dropped);
``dropped`` counts messages refused at enqueue time (`QueueFullError`, raised to the caller);
``retried`` counts message retries; ``requests`` produce requests written; ``set_bytes``
the bytes of the message sets written (what the broker appends: headers and compressed
wrappers included, so ``bytes_sent / set_bytes`` is the compression ratio).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields

__all__ = ["ProducerStats"]


@dataclass
class ProducerStats:
    messages_sent: int = 0
    bytes_sent: int = 0
    requests: int = 0
    failed: int = 0
    retried: int = 0
    dropped: int = 0
    set_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def sent(self) -> int:
        """Alias of ``messages_sent`` (docs/architecture.md names it ``sent``)."""
        return self.messages_sent

    def add(self, **deltas: int) -> None:
        """Add to several counters atomically (e.g. ``add(messages_sent=3, bytes_sent=90)``)."""
        with self._lock:
            for name, delta in deltas.items():
                setattr(self, name, getattr(self, name) + delta)

    def snapshot(self) -> dict[str, int]:
        """A consistent copy of every counter."""
        with self._lock:
            return {f.name: getattr(self, f.name) for f in fields(self)
                    if not f.name.startswith("_")}
