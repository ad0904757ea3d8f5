"""Shared pieces of the mirror's integration tests: real ZooKeeper, real 0.7 dev brokers,
a real Kafka-protocol target (tansu), real mirrors in threads or subprocesses.

The ``tansu`` fixture comes from ``fixtures/tansu.py`` (a plugin loaded by tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from mirror_helpers import FAST_MIRROR, FAST_TARGET, MirrorThread

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.mirror.config import MirrorConfig, TargetSpec
from zkconsumer.mirror.runner import build_mirror


@pytest.fixture
def start_mirror(zk_connect: str) -> Iterator[Callable[..., MirrorThread]]:
    """``start_mirror(to, topics=[...] | whitelist=..., group=, consumer_id=, **mirror_cfg)``."""
    running: list[MirrorThread] = []

    def start(to: str, *, topics: list[str] | None = None, whitelist: str | None = None,
              group: str = "mirror", consumer_id: str | None = None,
              target_options: dict[str, str] | None = None,
              consumer: dict[str, Any] | None = None, **settings: Any) -> MirrorThread:
        cfg = MirrorConfig(target=TargetSpec.parse(to),
                           target_options={**FAST_TARGET, **(target_options or {})}
                           if to.startswith("kafka://") else dict(target_options or {}),
                           **{**FAST_MIRROR, **settings})
        ccfg = ConsumerConfig(group_id=group, zk_connect=zk_connect, consumer_id=consumer_id,
                              rebalance_backoff_ms=200, fetcher_backoff_ms=50,
                              **(consumer or {}))
        sub = (Subscription(topics={t: 1 for t in topics}) if topics
               else Subscription(whitelist=whitelist))
        handle = MirrorThread(build_mirror(cfg, ccfg, sub)).start()
        running.append(handle)
        return handle

    yield start
    for handle in running:
        with contextlib.suppress(BaseException):
            handle.stop()


@pytest.fixture
def zk_connect_target(zk_server: Any) -> Iterator[str]:
    """A second chroot on the same ZooKeeper: the *target* 0.7 cluster."""
    chroot = f"/zkc-target-{uuid.uuid4().hex}"
    client = KazooClient(hosts=zk_server.connect_string, timeout=10.0)
    client.start(timeout=30)
    client.create(chroot, None)
    try:
        yield f"{zk_server.connect_string}{chroot}"
    finally:
        with contextlib.suppress(Exception):
            client.delete(chroot, recursive=True)
        client.stop()
        client.close()


