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
from collections.abc import Callable
from typing import Any

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror.config import MirrorConfig
from zkconsumer.mirror.engine import Mirror
from zkconsumer.mirror.exactly_once import ExactlyOnceMirror
from zkconsumer.mirror.targets import KafkaTarget, Target

__all__ = ["build_mirror", "exactly_once", "make_target"]


def exactly_once(config: MirrorConfig) -> bool:
    """Whether a run with ``config`` writes in transactions (``kafka://`` and not
    ``--at-least-once``)."""
    return config.target.kind == "kafka" and config.exactly_once


def make_target(config: MirrorConfig, *, client_id: str = "zkconsumer-mirror") -> Target:
    """The target client named by ``config.target`` (not connected yet)."""
    if config.target.kind == "kafka":
        return KafkaTarget(config.target.bootstrap, config.target_options, client_id=client_id)
    from zkconsumer.mirror.kafka07 import Kafka07Target

    assert config.target.zk_connect is not None  # TargetSpec.parse guarantees it
    return Kafka07Target(config.target.zk_connect, config.target_options)


class _SourceView:
    """Lazily opened read-only view of the source cluster's partition lists."""

    def __init__(self, consumer_config: ConsumerConfig) -> None:
        self._config = consumer_config
        self._session: Any = None
        self._lock = threading.Lock()

    def partitions(self, topic: str) -> list[str]:
        from zkconsumer.zk.registry import read_partition_names
        from zkconsumer.zk.session import ZkSession

        with self._lock:
            if self._session is None:
                self._session = ZkSession(
                    self._config.zk_connect,
                    session_timeout_ms=self._config.zk_session_timeout_ms,
                    connection_timeout_ms=self._config.zk_connection_timeout_ms).start()
            return read_partition_names(self._session, topic)

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
        if session is not None:
            session.close()


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
        return ExactlyOnceMirror(config, consumer, source_partitions=view.partitions,
                                 progress=progress, closers=[view.close],
                                 client_id=f"zkconsumer-mirror-{consumer.consumer_id}")
    if target is None:
        target = make_target(config, client_id=f"zkconsumer-mirror-{consumer.consumer_id}")
    view = _SourceView(consumer_config)
    return Mirror(config, consumer, target, source_partitions=view.partitions,
                  progress=progress, closers=[view.close])
