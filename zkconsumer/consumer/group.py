"""`GroupConsumer`: a member of a Kafka 0.7 consumer group, interoperable with Scala members.

Usage::

    config = ConsumerConfig.from_properties(load_properties("consumer.properties"))
    with GroupConsumer(config, Subscription(topics={"events": 2})) as consumer:
        for msg in consumer:           # ConsumerTimeoutError per consumer.timeout.ms
            handle(msg.value)

Delivery semantics: at-least-once.  With ``auto_ack=True`` (default, the reference's
semantics) a message counts as processed when it is handed out; with ``auto_ack=False`` only
`ack` counts, and `ack` of a message acknowledges every earlier message of its partition.
Commits (every ``autocommit.interval.ms``, on every rebalance, on `commit` and on `close`)
write the acknowledged position.  Duplicates after a failure are bounded by what was
acknowledged but not yet committed (plus a whole compressed set, whose inner messages share
offsets).

Lifecycle: `start` registers and runs the first rebalance (raising `RebalanceFailedError`
if it cannot); `close` stops fetching, commits (if autocommit is on or acks are manual),
and closes the ZooKeeper session, so our ids and owner znodes vanish at once and the other
members rebalance immediately.  See docs/consumer.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

from zkconsumer.consumer import member_state
from zkconsumer.consumer.columns import Columns, PartitionRun
from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.delivery import Delivery
from zkconsumer.consumer.fetcher_pool import FetcherPool
from zkconsumer.consumer.member_driver import MemberDriver
from zkconsumer.consumer.member_machine import MemberMachine
from zkconsumer.consumer.member_state import MemberConfig
from zkconsumer.consumer.message import (
    ConsumerListener,
    ConsumerStats,
    Message,
    MessageBatch,
    PartitionState,
)
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.errors import ConsumerError, ConsumerTimeoutError, ZooKeeperError
from zkconsumer.zk.paths import make_consumer_id
from zkconsumer.zk.session import ZkSession

__all__ = ["GroupConsumer"]

log = logging.getLogger(__name__)


class GroupConsumer:
    """One member of a balanced consumer group (see the module docstring)."""

    def __init__(self, config: ConsumerConfig, subscription: Subscription, *,
                 sleep: Callable[[float], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(config, ConsumerConfig):
            raise ConsumerError("config must be a ConsumerConfig")
        if not isinstance(subscription, Subscription):
            raise ConsumerError("subscription must be a Subscription")
        self.config = config
        self.subscription = subscription
        self.consumer_id = (f"{config.group_id}_{config.consumer_id}" if config.consumer_id
                            else make_consumer_id(config.group_id))
        self._stats = ConsumerStats()
        self._listeners: list[ConsumerListener] = []
        self._delivery = Delivery(config.queuedchunks_max, config.auto_ack, self._stats, clock)
        self._session = ZkSession(config.zk_connect,
                                  session_timeout_ms=config.zk_session_timeout_ms,
                                  connection_timeout_ms=config.zk_connection_timeout_ms,
                                  security=config.zk_security)
        # ``sleep`` is accepted for compatibility: backoffs are timers of the machine now.
        machine = MemberMachine(MemberConfig.from_consumer(
            config, subscription.topic_count, self.consumer_id,
            parked_retry_s=member_state.PARKED_RETRY_S), self._stats)
        self._pool = FetcherPool(config, self.consumer_id, self._delivery,
                                 on_reset=lambda s, o: self._driver.on_reset(s, o),
                                 on_park=lambda s, e: self._driver.on_park(s, e), clock=clock)
        self._driver = MemberDriver(machine, self._session, self._pool, self._delivery,
                                    self._listeners, clock=clock)
        self._started = False
        self._closed = False
        self._close_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<GroupConsumer {self.consumer_id} {self.subscription!r}>"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, register, rebalance; `RebalanceFailedError` if the group cannot settle."""
        if self._started:
            return
        if self._closed:
            raise ConsumerError("consumer is closed")
        self._started = True
        self._driver.notify("on_state", "STARTING")
        try:
            self._session.start()
            with self._close_lock:  # a close from another thread: before or after, not during
                if self._closed:
                    raise ConsumerError(f"{self.consumer_id}: closed while starting")
                self._driver.launch()
            self._driver.wait_started()
        except BaseException:
            self.close()
            raise

    def close(self, timeout: float | None = None) -> None:
        """Stop fetching, commit, and end the ZooKeeper session.  Idempotent.

        Callable from another thread while `start` runs (a daemon's stop): a connection
        attempt ends at once, a first rebalance is abandoned, and `start` raises
        `ConsumerError` (`ZooKeeperError` if it was still connecting).

        With a ``timeout`` (seconds) the whole close returns within it, whatever ZooKeeper
        does: the final commit writes every partition at once (`GroupConsumer.commit`), and
        a session close ZooKeeper does not confirm in time is left to finish in the
        background (the session, with our ids and owner znodes, then ends when it expires).
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if not self._driver.close(timeout):
            log.warning("%s: the member did not finish closing in time; ending its ZooKeeper "
                        "session anyway", self.consumer_id)
            self._pool.stop_fetchers()
            self._delivery.close()
            threading.Thread(target=self._session.close, daemon=True,
                             name=f"zk-close-{self.consumer_id}").start()

    def __enter__(self) -> GroupConsumer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- consuming ----------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise ConsumerError("call start() (or use the consumer as a context manager) first")

    def __iter__(self) -> Iterator[Message]:
        return self

    def __next__(self) -> Message:
        """The next message; `ConsumerTimeoutError` after ``consumer.timeout.ms`` (the
        iterator stays usable); StopIteration once closed."""
        self._check_started()
        ms = self.config.consumer_timeout_ms
        msg = self._delivery.poll(None if ms < 0 else ms / 1000.0)
        if msg is None:
            if self._delivery.closed:
                raise StopIteration
            raise ConsumerTimeoutError(f"no message within consumer.timeout.ms={ms}")
        return msg

    def poll(self, timeout: float | None = None) -> Message | None:
        """One message, or None after ``timeout`` seconds (None: wait) or when closed."""
        self._check_started()
        return self._delivery.poll(timeout)

    def poll_batch(self, max_messages: int = 10000,
                   timeout: float | None = None) -> list[Message]:
        """Up to ``max_messages`` messages (at least one unless the timeout expired)."""
        self._check_started()
        if max_messages < 1:
            raise ConsumerError("max_messages must be >= 1")
        return self._delivery.poll_batch(max_messages, timeout)

    def poll_view(self, max_messages: int = 10000,
                  timeout: float | None = None) -> MessageBatch:
        """`poll_batch` for hot loops: a `MessageBatch` whose messages are built lazily.

        Same hand-out and ack semantics; iterate it once (or use ``.values()``) -- at high
        rates this avoids most of the per-message cost (see `Delivery.poll_view`).
        """
        self._check_started()
        if max_messages < 1:
            raise ConsumerError("max_messages must be >= 1")
        return self._delivery.poll_view(max_messages, timeout)

    def poll_columns(self, max_messages: int = 100_000,
                     timeout: float | None = None) -> Columns:
        """The batch path: up to ``max_messages`` as columns, no object per message.

        Same hand-out and ack semantics as `poll_batch`; the result is a `Columns` of
        `PartitionRun` objects (offsets and payloads as views into the decoded fetch
        answers).  Acknowledge a run with `ack_run` (or `ack` of ``run.last_message()``).
        """
        self._check_started()
        if max_messages < 1:
            raise ConsumerError("max_messages must be >= 1")
        return self._delivery.poll_columns(max_messages, timeout)

    def claimed(self) -> dict[tuple[str, str], PartitionState]:
        """The consumer's record of every owned partition, ``{(topic, "B-P"): state}``.

        For rebalance listeners that keep per-claim state of their own: ``state.claim``
        identifies the claim (messages carry it), ``state.fetch_offset`` is where fetching
        starts (the committed offset, at ``on_assigned``).  Read it; move it with `seek`.
        """
        return self._pool.states()

    def seek(self, topic: str, partition: str, offset: int) -> None:
        """Start a just-claimed partition at ``offset`` instead of its committed offset.

        Only from ``on_assigned`` (the fetchers start after it returns): a position kept
        elsewhere -- e.g. the exactly-once mirror's checkpoint in the target -- wins over
        ZooKeeper's.  ``offset`` must be a message boundary.  `ConsumerError` if the
        partition is not owned.
        """
        state = self._pool.states().get((topic, partition))
        if state is None or not state.active:
            raise ConsumerError(f"cannot seek {topic}/{partition}: not owned by this member")
        state.reset_to(offset)

    def ack_run(self, run: PartitionRun) -> None:
        """Acknowledge every message of ``run`` and everything before it in its partition."""
        self.ack(run.last_message())

    def ack(self, message: Message) -> None:
        """Acknowledge ``message`` and every earlier message of its partition.

        Acks for partitions this member no longer owns (a rebalance released them) are
        ignored: their next owner resumes from the last committed offset.
        """
        if not self._pool.ack(message):
            log.debug("ignoring ack of %r: partition no longer owned", message)

    def commit(self, timeout: float | None = None) -> None:
        """Write the acknowledged offsets of owned partitions that changed since last time.

        Raises `ZooKeeperError` if some could not be written (the others are written).
        With a ``timeout`` (seconds) all partitions are written at once and the call returns
        within it, whatever ZooKeeper does; what was not written in time is logged.
        """
        self._check_started()
        failures = self._driver.commit(timeout)
        if failures:
            raise ZooKeeperError(f"{failures} offset(s) could not be committed (see log)")

    # -- introspection ------------------------------------------------------------------------

    def owned_partitions(self) -> dict[str, list[str]]:
        """``{topic: ["B-P", ...]}`` currently owned by this member."""
        return self._pool.owned()

    def add_listener(self, listener: ConsumerListener | Any) -> None:
        """Register an object with any of ``on_assigned``, ``on_revoked``, ``on_state``."""
        self._listeners.append(listener)

    @property
    def state(self) -> str:
        return self._driver.public_state

    @property
    def session(self) -> ZkSession:
        """The member's ZooKeeper session (tests expire it; tools may read through it)."""
        return self._session

    def request_rebalance(self) -> None:
        """Ask the coordinator thread for a rebalance (normally ZooKeeper events do)."""
        self._driver.request_rebalance()

    def watches_armed(self) -> bool:
        """True if every ZooKeeper watch of the member is armed on the current connection
        (they re-arm by themselves after every reconnect)."""
        return self._driver.watches_armed

    def check_assignment(self) -> list[str]:
        """Differences between what this member owns and the group's reference decision as
        ZooKeeper shows it now, one line each ([] = agreement).  Reads ZooKeeper; raises
        `ZkConsumerError` when it cannot."""
        return self._driver.check_assignment()

    @property
    def stats(self) -> ConsumerStats:
        """Counters, with the per-partition positions refreshed now."""
        parts: dict[str, dict[str, Any]] = {}
        for (topic, name), s in sorted(self._pool.states().items()):
            lag = None
            if s.log_end is not None and s.consumed_offset is not None:
                lag = max(0, s.log_end - s.consumed_offset)
            parts[f"{topic}/{name}"] = {
                "consumed": s.consumed_offset, "acked": s.acked_offset,
                "committed": s.committed_offset, "fetched": s.fetch_offset,
                "log_end": s.log_end, "lag": lag, "thread": s.thread_id,
                "error": str(s.error) if s.error is not None else None,
            }
        self._stats.partitions = parts
        return self._stats
