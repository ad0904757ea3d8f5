"""The soak's producer: uniquely numbered messages, plain, gzip, snappy and keyed, confirmed.

One thread sends ``soak-<id>`` payloads (ids 0, 1, 2 ... never reused) at a paced rate
through three `Producer` instances (codec none, gzip, snappy) in confirmed sync mode.
Each send is a small batch of consecutive ids with a random codec, a third of them keyed
(routed by a Scala-compatible key hash), chosen by ``random.Random(seed)``.

Invariants: an id counts as *produced* only once a confirmed send returned; a send that
failed (broker killed, ZooKeeper down) is retried with the same ids until it is confirmed
or the load stops, so a failed send may leave its ids in the log twice (a producer-side
duplicate, which the judge counts apart) but never makes one vanish from the count.
``produced_at[id]`` is the wall time of the confirmation, used to tell which faults
preceded a gap.
"""

from __future__ import annotations

import logging
import random
import threading
import time

from zkconsumer.bench.soak_check import PREFIX
from zkconsumer.errors import ZkConsumerError
from zkconsumer.producer import Producer
from zkconsumer.protocol import Compression

__all__ = ["Load"]

log = logging.getLogger(__name__)

_CODECS = (Compression.NONE, Compression.GZIP, Compression.SNAPPY)


class Load(threading.Thread):
    """``Load(zk, topic, rate=1000, seed=1).start()``; `stop` returns the produced count."""

    def __init__(self, zk_connect: str, topic: str, *, rate: float, seed: int,
                 max_batch: int = 20, session_timeout_ms: int = 6000) -> None:
        super().__init__(name="soak-load", daemon=True)
        self.zk_connect = zk_connect
        self.topic = topic
        self.rate = rate
        self.rng = random.Random(seed)
        self.max_batch = max_batch
        self.session_timeout_ms = session_timeout_ms
        self.produced_at: dict[int, float] = {}
        self.failed_sends = 0
        self.error: BaseException | None = None
        self._halt = threading.Event()
        self._next_id = 0

    def run(self) -> None:
        producers = [Producer(zk_connect=self.zk_connect, confirm=True, compression_codec=c,
                              socket_timeout_ms=5000, connect_timeout_ms=2000,
                              zk_session_timeout_ms=self.session_timeout_ms)
                     for c in _CODECS]
        retry: list[int] = []
        started = time.monotonic()
        sent = 0
        try:
            while not self._halt.is_set():
                ids = retry or self._new_ids()
                retry = []
                producer = self.rng.choice(producers)
                key = f"k{ids[0] % 13}" if self.rng.random() < 0.33 else None
                try:
                    producer.send(self.topic, [f"{PREFIX}{i}".encode() for i in ids], key=key)
                except ZkConsumerError as exc:  # DeliveryError, broker/ZooKeeper outages
                    self.failed_sends += 1
                    log.info("soak load: send of %d id(s) failed, retrying: %s", len(ids), exc)
                    retry = ids
                    self._halt.wait(0.1)
                    continue
                now = time.time()
                for i in ids:
                    self.produced_at[i] = now
                sent += len(ids)
                # pace: the n-th message is due at started + n / rate
                self._halt.wait(max(0.0, started + sent / self.rate - time.monotonic()))
        except BaseException as exc:  # reported by stop(); the soak fails on it
            self.error = exc
        finally:
            for p in producers:
                p.close(timeout=5)

    def _new_ids(self) -> list[int]:
        n = self.rng.randint(1, self.max_batch)
        ids = list(range(self._next_id, self._next_id + n))
        self._next_id += n
        return ids

    def stop(self, timeout: float = 30.0) -> int:
        self._halt.set()
        self.join(timeout)
        if self.is_alive():
            raise ZkConsumerError(f"soak load did not stop within {timeout}s")
        if self.error is not None:
            raise ZkConsumerError(f"soak load failed: {self.error!r}") from self.error
        return len(self.produced_at)
