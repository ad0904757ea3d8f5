"""Assemble a `Mirror` from configuration: source group member, target client, source view.

Kept apart from `zkconsumer.mirror.engine` so the engine can be driven by any consumer and
target (tests of the loop), and from the CLI so tests and the benchmark build real mirrors
without argparse.

The source consumer is a `GroupConsumer` with ``auto_ack=False`` (only target-acknowledged
messages count) and its own autocommit off (the mirror commits every
``mirror.commit.interval.ms``; the consumer still commits on every rebalance and on close).
``preserve`` needs every source partition of a topic, owned or not: a second, read-only
ZooKeeper session on the source cluster answers that, opened only when first needed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.errors import ConfigurationError, ZkConsumerError
from zkconsumer.mirror.config import MirrorConfig
from zkconsumer.mirror.engine import Mirror
from zkconsumer.mirror.exactly_once import ExactlyOnceMirror
from zkconsumer.mirror.targets import KafkaTarget, Target

if TYPE_CHECKING:
    from zkconsumer.mirror.serve import Telemetry
    from zkconsumer.zk.paths import BridgeCheckpoint
    from zkconsumer.zk.session import ZkSession

__all__ = ["build_mirror", "describe_mode", "exactly_once", "make_target", "telemetry"]


def exactly_once(config: MirrorConfig) -> bool:
    """Whether a run with ``config`` writes in transactions (``kafka://`` and not
    ``--at-least-once``)."""
    return config.target.kind == "kafka" and config.exactly_once


def make_target(config: MirrorConfig, *, client_id: str = "zkconsumer-mirror") -> Target:
    """The target client named by ``config.target`` (not connected yet)."""
    if config.target.kind == "kafka":
        return KafkaTarget(config.target.bootstrap, config.target_options, client_id=client_id,
                           producers=config.target_producers)
    from zkconsumer.mirror.kafka07 import Kafka07Target

    assert config.target.zk_connect is not None  # TargetSpec.parse guarantees it
    return Kafka07Target(config.target.zk_connect, config.target_options)


class _SourceView:
    """Lazily opened read-only view of the source cluster: partition lists (``preserve``)
    and log ends (the lag of a first run, before the fetchers reached the end)."""

    def __init__(self, consumer_config: ConsumerConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._config = consumer_config
        self._session: ZkSession | None = None
        self._lock = threading.Lock()
        self._clock = clock
        self._ends: dict[str, int] = {}
        self._ends_at = -1e9

    def _zk(self) -> ZkSession:
        from zkconsumer.zk.session import ZkSession

        if self._session is None:
            self._session = ZkSession(
                self._config.zk_connect,
                session_timeout_ms=self._config.zk_session_timeout_ms,
                connection_timeout_ms=self._config.zk_connection_timeout_ms,
                security=self._config.zk_security).start()
        return self._session

    def partitions(self, topic: str) -> list[str]:
        from zkconsumer.zk.registry import read_partition_names

        with self._lock:
            return read_partition_names(self._zk(), topic)

    def log_ends(self, names: list[str], max_age: float = 2.0) -> dict[str, int]:
        """``{"topic/B-P": latest offset}`` of ``names``, asked of the brokers at most every
        ``max_age`` seconds; a broker that does not answer leaves its partitions out."""
        from zkconsumer.client import SimpleConsumer
        from zkconsumer.zk.registry import read_brokers

        with self._lock:
            if self._clock() - self._ends_at < max_age and all(n in self._ends for n in names):
                return dict(self._ends)
            ends: dict[str, int] = {}
            brokers = read_brokers(self._zk())
            for name in names:
                topic, _, part = name.rpartition("/")
                b, _, p = part.partition("-")
                info = brokers.get(int(b))
                if info is None:
                    continue
                try:
                    with SimpleConsumer(info.host, info.port, socket_timeout=5.0) as c:
                        ends[name] = c.latest_offset(topic, int(p))
                except ZkConsumerError:
                    continue
            self._ends, self._ends_at = ends, self._clock()
            return dict(ends)

    def bridged_partitions(self, topic: str) -> list[str]:
        """0.7 partitions of ``topic`` some bridge keeps checkpoints for (loopguard.py)."""
        from zkconsumer.zk.paths import BRIDGE_TARGETS

        with self._lock:
            return self._zk().get_children(f"{BRIDGE_TARGETS}/{topic}")

    def bridge_checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]:
        """Every bridge group's checkpoint of one 0.7 partition."""
        from zkconsumer.zk.paths import bridge_partition_path, parse_bridge_checkpoint

        parent = bridge_partition_path(topic, partition)
        out = []
        with self._lock:
            session = self._zk()
            for group in session.get_children(parent):
                data = session.get(f"{parent}/{group}")
                if data is not None:
                    out.append(parse_bridge_checkpoint(f"{parent}/{group}", data))
        return out

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()


def describe_mode(config: MirrorConfig) -> str:
    """The start-up log's words for how a run with ``config`` writes."""
    if exactly_once(config):
        return f"exactly-once: transactions, checkpoints in {config.checkpoint_topic}"
    if config.target.kind == "kafka":
        return "at-least-once (--at-least-once): duplicates possible after a crash"
    return "at-least-once (kafka07:// targets have no transactions)"


def telemetry(mirror: Mirror | ExactlyOnceMirror) -> Telemetry:
    """The lag of a forward mirror as `serve` shows it: the consumer's own byte lag per
    partition, and -- for a partition whose fetcher has not reached the log end yet (a first
    run's backfill) -- log end minus position from the brokers, so the lag is live from the
    first second."""
    from zkconsumer.mirror.serve import Telemetry

    def partitions() -> dict[str, dict[str, Any]]:
        # mirror.consumer, read each time: a failed start replaces it (`SourceGroupEngine`)
        parts = {name: dict(info) for name, info in mirror.consumer.stats.partitions.items()}
        unknown = [n for n, info in parts.items() if info.get("lag") is None]
        if unknown and mirror.view is not None:
            try:
                ends = mirror.view.log_ends(unknown)
            except ZkConsumerError:
                ends = {}
            for name, end in ends.items():
                info = parts[name]
                at = next((info[k] for k in ("consumed", "fetched", "committed")
                           if info.get(k) is not None), None)
                if at is not None:
                    info["lag"] = max(0, end - at)
        return parts

    def lag_bytes() -> int | None:
        lags = [p["lag"] for p in partitions().values() if p.get("lag") is not None]
        return sum(lags) if lags else None

    return Telemetry(owned=lambda: len(mirror.consumer.stats.partitions), partitions=partitions,
                     lag_bytes=lag_bytes)


def build_mirror(config: MirrorConfig, consumer_config: ConsumerConfig,
                 subscription: Subscription, *,
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 target: Target | None = None) -> Mirror | ExactlyOnceMirror:
    """A ready-to-`run` mirror (nothing is connected until ``run``): `ExactlyOnceMirror` for a
    ``kafka://`` target unless ``config.exactly_once`` is off, else the at-least-once
    `Mirror`."""
    from zkconsumer.consumer.group import GroupConsumer

    if consumer_config.shallow_iterator_enable:
        # 0.7 MirrorMaker passed compressed wrappers through between 0.7 clusters; here every
        # message is re-produced on its own (and a modern cluster cannot take 0.7 wrappers).
        raise ConfigurationError("shallowiterator.enable=true is not supported by zkconsumer "
                                 "mirror: messages are mirrored one by one (decompressed)")
    consumer_config = consumer_config.replace(auto_ack=False, autocommit_enable=False)
    consumer = GroupConsumer(consumer_config, subscription)
    if exactly_once(config) and target is None:
        view = _SourceView(consumer_config)
        eos = ExactlyOnceMirror(config, consumer, source_partitions=view.partitions,
                                progress=progress, closers=[view.close],
                                client_id=f"zkconsumer-mirror-{consumer.consumer_id}")
        eos.view = view
        return eos
    if target is None:
        target = make_target(config, client_id=f"zkconsumer-mirror-{consumer.consumer_id}")
    view = _SourceView(consumer_config)
    mirror = Mirror(config, consumer, target, source_partitions=view.partitions,
                    progress=progress, closers=[view.close])
    mirror.view = view
    return mirror
