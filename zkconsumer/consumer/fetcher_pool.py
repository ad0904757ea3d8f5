"""`FetcherPool`: the owned partitions' fetch state, their fetchers, and the acks.

The member's machine decides which partitions are owned; the driver tells this pool
(`AddPartitions`, `RevokePartitions`, `DropPartitions`, `StopFetchers`, `StartFetchers`)
and the pool keeps what the fetchers and the application share: one `PartitionState` per
owned partition, one `Fetcher` thread per broker, and the acknowledged positions.

Threads: the driver thread changes the registry; fetcher threads and the application read
states and write positions; `ack` (any thread) takes only the short ``_lock``, never a
ZooKeeper call.  The machine learns of acks through `changed_acks`, which the driver calls
before every event that may lead to a commit -- so the hot path (an ack per message) costs
an attribute write, and the machine never commits an offset the application did not
acknowledge.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterable

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.delivery import Delivery, FetchHandle
from zkconsumer.consumer.fetcher import Fetcher
from zkconsumer.consumer.member_commands import OwnedPartition
from zkconsumer.consumer.member_events import Acked, Key
from zkconsumer.consumer.member_zkops import group_by_topic
from zkconsumer.consumer.message import Message, PartitionState
from zkconsumer.zk.paths import BrokerInfo, parse_partition_name

__all__ = ["FetcherPool"]

log = logging.getLogger(__name__)


class FetcherPool:
    """See the module docstring."""

    def __init__(self, config: ConsumerConfig, consumer_id: str, delivery: Delivery, *,
                 on_reset: Callable[[PartitionState, int], None],
                 on_park: Callable[[PartitionState, BaseException], None],
                 clock: Callable[[], float]) -> None:
        self.config = config
        self.consumer_id = consumer_id
        self.delivery = delivery
        self._on_reset = on_reset
        self._on_park = on_park
        self._clock = clock
        self._states: dict[Key, PartitionState] = {}
        self._reported: dict[Key, int | None] = {}  # acked offset last told to the machine
        self._fetchers: list[Fetcher] = []
        self._stopped: list[Fetcher] = []
        self._lock = threading.Lock()

    # -- reads (any thread) --------------------------------------------------------------------

    def states(self) -> dict[Key, PartitionState]:
        """A snapshot (the registry changes on the driver thread)."""
        with self._lock:
            return dict(self._states)

    def owned(self) -> dict[str, list[str]]:
        return group_by_topic(self.states())

    # -- acks ----------------------------------------------------------------------------------

    def ack(self, message: Message) -> bool:
        """Acknowledge ``message`` and every earlier one of its partition; False if stale."""
        state = message._state
        if state is None:
            return False
        with self._lock:
            if state.released:
                return False
            if state.acked_offset is None or message.next_offset > state.acked_offset:
                state.acked_offset = message.next_offset
            return True

    def changed_acks(self) -> list[Acked]:
        """`Acked` events for the positions that moved since the last call (driver thread)."""
        out = []
        with self._lock:
            for key, state in self._states.items():
                acked = state.acked_offset
                if acked is not None and acked != self._reported.get(key):
                    self._reported[key] = acked
                    out.append(Acked(state.topic, state.name, acked))
        return out

    # -- the registry (driver thread) ----------------------------------------------------------

    def add(self, partitions: Iterable[OwnedPartition]) -> None:
        fetch_size = self.config.fetch_size
        added = []
        for p in partitions:
            broker, part = parse_partition_name(p.partition)
            state = PartitionState(p.topic, broker, part, p.thread_id, p.offset, p.offset,
                                   fetch_size)
            state.error = p.error
            added.append(state)
        with self._lock:
            for state in added:
                self._states[state.key] = state
                self._reported[state.key] = state.acked_offset
        for state in added:
            if state.error is not None:  # parked at the claim: the application hears once
                self.delivery.put_error(FetchHandle(), state, state.error)

    def revoke(self, keys: Iterable[Key]) -> None:
        """No more hand-out of these partitions; acks still count until `drop`."""
        with self._lock:
            states = [self._states[k] for k in keys if k in self._states]
        self.delivery.revoke(states)

    def drop(self, keys: Iterable[Key]) -> None:
        """Forget the partitions: later acks of their messages are ignored."""
        with self._lock:
            for key in keys:
                state = self._states.pop(key, None)
                self._reported.pop(key, None)
                if state is not None:
                    state.active = False
                    state.released = True

    def record_committed(self, topic: str, partition: str, offset: int) -> None:
        state = self._states.get((topic, partition))
        if state is not None:
            state.committed_offset = offset

    # -- fetchers (driver thread) --------------------------------------------------------------

    def stop_fetchers(self) -> None:
        """Invalidate every fetcher at once (they exit on their own; nothing they fetch counts)."""
        fetchers, self._fetchers = self._fetchers, []
        self.delivery.stop([f.handle for f in fetchers])
        for f in fetchers:
            f.stop()
        self._stopped = [f for f in self._stopped + fetchers if f.alive]

    def start_fetchers(self, brokers: Iterable[BrokerInfo]) -> None:
        """One fetcher per broker for the active, healthy partitions we own."""
        self.stop_fetchers()
        by_id = {b.id: b for b in brokers}
        per_broker: dict[int, list[PartitionState]] = defaultdict(list)
        for state in self.states().values():
            if state.active and state.error is None:
                per_broker[state.broker_id].append(state)
        cfg = self.config
        for bid, states in sorted(per_broker.items()):
            broker = by_id.get(bid)
            if broker is None:  # the machine never claims those; stay defensive
                log.warning("broker %s is not registered; its partitions wait for the next "
                            "rebalance", bid)
                continue
            fetcher = Fetcher(
                broker, states, self.delivery, reset_policy=cfg.autooffset_reset,
                fetch_size=cfg.fetch_size, max_fetch_size=cfg.max_fetch_size,
                backoff_s=cfg.fetcher_backoff_ms / 1000.0,
                socket_timeout_s=cfg.socket_timeout_ms / 1000.0,
                buffer_size=cfg.socket_buffersize, on_reset=self._on_reset,
                on_park=self._on_park, group=cfg.group_id,
                name=f"{self.consumer_id}-fetcher-{bid}")
            self._fetchers.append(fetcher)
            fetcher.start()

    def join_fetchers(self, timeout: float) -> None:
        deadline = self._clock() + timeout
        for f in self._stopped + self._fetchers:
            f.join(max(0.0, deadline - self._clock()))
