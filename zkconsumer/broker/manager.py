"""All partition logs of one broker: loading, creation, partition checks, flushing, retention.

Job: what Kafka 0.7.2's ``log/LogManager.scala`` does -- find the logs under ``log.dir`` at
start, create a log on the first produce to a partition, check topic names and partition
ranges against the *broker-local* count, flush on a timer, delete old segments, and tell the
ZooKeeper registrar when a topic gets its first log on this broker.

Invariants
    * `get_log` never creates anything (a fetch or offsets request for a partition without a
      log answers empty / ``[0]``, KAFKA-101); only `get_or_create_log` creates.
    * The topic check and the partition range check happen before any lookup, for every
      request kind (getLogPool), so an illegal topic or partition never creates a directory.
    * ``on_new_topic(topic)`` is called once per topic, after its first log directory and
      segment exist -- never for a topic whose directory could not be created (a 254-character
      name exceeds the file-name limit: the produce fails and nothing is registered).
    * A clean shutdown leaves ``.kafka_cleanshutdown`` in ``log.dir`` (like KafkaServer); the
      next start then skips recovery.  Without it, each log's last segment is recovered.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

from zkconsumer.broker.config import BrokerConfig
from zkconsumer.broker.log import LogSettings, PartitionLog, Segment
from zkconsumer.broker.topics import validate_topic_name
from zkconsumer.errors import BrokerStartupError, WrongPartitionError
from zkconsumer.protocol.logformat import parse_partition_dir, partition_dir

__all__ = ["CLEAN_SHUTDOWN_FILE", "LogManager"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class LogManager:
    """The broker's logs, keyed by topic then partition."""

    def __init__(self, config: BrokerConfig, *,
                 on_new_topic: Callable[[str], None] | None = None,
                 clock_ms: Callable[[], int] | None = None,
                 rng: random.Random | None = None,
                 cleanup_interval_s: float | None = None) -> None:
        self.config = config
        self.dir = Path(config.log_dir)
        self._on_new_topic = on_new_topic
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._rng = rng or random.Random()
        self._create_lock = threading.Lock()
        self._logs: dict[str, dict[int, PartitionLog]] = {}
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._cleanup_interval_s = (cleanup_interval_s if cleanup_interval_s is not None
                                    else config.log_cleanup_interval_mins * 60.0)
        self._graveyard: list[tuple[float, Segment]] = []
        self._load()

    # --------------------------------------------------------------------- loading
    def _load(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BrokerStartupError(f"cannot create log.dir {self.dir}: {exc}") from exc
        if not self.dir.is_dir() or not os.access(self.dir, os.R_OK | os.W_OK | os.X_OK):
            raise BrokerStartupError(f"{self.dir} is not a readable log directory")
        marker = self.dir / CLEAN_SHUTDOWN_FILE
        recover = not marker.exists()
        if not recover:
            marker.unlink()
        for entry in sorted(self.dir.iterdir()):
            if not entry.is_dir():
                if entry.name != CLEAN_SHUTDOWN_FILE:
                    log.warning("skipping unexplainable file %s -- should it be there?", entry)
                continue
            parsed = parse_partition_dir(entry.name)
            if parsed is None:
                log.warning("skipping directory %s: not <topic>-<partition>", entry)
                continue
            topic, partition = parsed
            log.info("loading log %s", entry.name)
            plog = PartitionLog(entry, topic, partition, self._settings(topic),
                                recover=recover, clock_ms=self._clock_ms)
            self._logs.setdefault(topic, {})[partition] = plog

    def _settings(self, topic: str) -> LogSettings:
        c = self.config
        return LogSettings(segment_size=c.segment_size_for(topic),
                           flush_interval=c.flush_interval,
                           roll_ms=c.roll_ms_for(topic), fsync=c.fsync)

    # --------------------------------------------------------------------- lookups
    def topics(self) -> list[str]:
        """Every topic with at least one log here (what the registrar announces)."""
        return sorted(t for t, parts in self._logs.items() if parts)

    def all_logs(self) -> list[PartitionLog]:
        return [p for parts in list(self._logs.values()) for p in list(parts.values())]

    def partition_count(self, topic: str) -> int:
        return self.config.partitions_for(topic)

    def check(self, topic: str, partition: int) -> None:
        """getLogPool's checks: InvalidTopicError, then WrongPartitionError."""
        validate_topic_name(topic, self.config.max_topic_name_length)
        n = self.config.partitions_for(topic)
        if partition < 0 or partition >= n:
            log.warning("wrong partition %d, valid partitions (0,%d)", partition, n - 1)
            raise WrongPartitionError(f"wrong partition {partition}", topic=topic,
                                      partition=partition)

    def choose_random_partition(self, topic: str) -> int:
        return self._rng.randrange(self.config.partitions_for(topic))

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log if it exists (after the topic/partition checks)."""
        self.check(topic, partition)
        parts = self._logs.get(topic)
        return None if parts is None else parts.get(partition)

    def get_or_create_log(self, topic: str, partition: int) -> PartitionLog:
        """The partition's log, creating its directory and empty first segment if needed."""
        existing = self.get_log(topic, partition)
        if existing is not None:
            return existing
        with self._create_lock:
            parts = self._logs.get(topic)
            if parts is not None and partition in parts:
                return parts[partition]
            directory = self.dir / partition_dir(topic, partition)
            directory.mkdir(parents=True, exist_ok=True)  # OSError (name too long) -> caller
            plog = PartitionLog(directory, topic, partition, self._settings(topic),
                                recover=False, clock_ms=self._clock_ms)
            new_topic = not parts
            self._logs.setdefault(topic, {})[partition] = plog
            log.info("created log for %r-%d", topic, partition)
        if new_topic and self._on_new_topic is not None:
            self._on_new_topic(topic)
        return plog

    # --------------------------------------------------------------------- background work
    def start(self) -> None:
        """Start the flusher (and retention) thread."""
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._run, name="broker-log-flusher",
                                             daemon=True)
            self._flusher.start()

    def _run(self) -> None:
        period = self.config.flush_scheduler_interval_ms / 1000.0
        next_cleanup = time.monotonic() + min(60.0, self._cleanup_interval_s)
        while not self._stop.wait(period):
            self.flush_due()
            if time.monotonic() >= next_cleanup:
                self.cleanup()
                next_cleanup = time.monotonic() + self._cleanup_interval_s

    def flush_due(self) -> None:
        """flushAllLogs: flush each log whose last flush is older than its interval."""
        now = self._clock_ms()
        for plog in self.all_logs():
            try:
                if now - plog.last_flushed_ms >= self.config.flush_ms_for(plog.topic):
                    plog.flush()
            except OSError:
                log.exception("error flushing %s-%d", plog.topic, plog.partition)

    def flush_all(self) -> None:
        for plog in self.all_logs():
            plog.flush()

    def cleanup(self) -> int:
        """cleanupLogs: delete segments past log.retention.hours / log.retention.size."""
        now = self._clock_ms()
        total = 0
        for plog in self.all_logs():
            age_ms = self.config.retention_ms_for(plog.topic)

            def expired(s: Segment, age_ms: int = age_ms) -> bool:
                return now - s.mtime_ms() > age_ms

            gone = plog.delete_oldest_while(expired)
            limit = self.config.retention_size_for(plog.topic)
            if limit >= 0:
                diff = sum(s.hwm for s in plog.segments) - limit

                def shrink(s: Segment) -> bool:
                    nonlocal diff
                    if diff - s.hwm >= 0:
                        diff -= s.hwm
                        return True
                    return False

                if diff > 0:
                    gone += plog.delete_oldest_while(shrink)
            for seg in gone:
                log.info("deleting log segment %s", seg.path)
                try:
                    seg.path.unlink()
                except OSError:
                    log.warning("delete of %s failed", seg.path)
                self._graveyard.append((time.monotonic(), seg))
            total += len(gone)
        self._bury(time.monotonic() - 60.0)
        return total

    def _bury(self, before: float) -> None:
        """Close fds of deleted segments once no fetch can still be sending from them."""
        keep = []
        for when, seg in self._graveyard:
            if when <= before:
                with contextlib.suppress(OSError):
                    os.close(seg.fd)
            else:
                keep.append((when, seg))
        self._graveyard = keep

    def close(self, *, clean: bool = True) -> None:
        """Stop the flusher, flush and close every log, leave the clean-shutdown marker."""
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=10)
        for plog in self.all_logs():
            try:
                plog.close()
            except OSError:
                log.exception("error closing %s-%d", plog.topic, plog.partition)
        self._bury(float("inf"))
        if clean:
            try:
                (self.dir / CLEAN_SHUTDOWN_FILE).touch()
            except OSError:
                log.warning("cannot write %s", self.dir / CLEAN_SHUTDOWN_FILE)
