"""Fixtures of the consumer-group integration tests (helpers live in ``groupkit``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from groupkit import ProcMember, fast_config

from zkconsumer.consumer import GroupConsumer, Subscription


@pytest.fixture
def make_consumer(zk_connect: str) -> Iterator[Callable[..., GroupConsumer]]:
    """``make_consumer(subscription, start=True, **config_overrides)``; closed at teardown."""
    made: list[GroupConsumer] = []

    def make(subscription: Subscription, *, start: bool = True,
             **overrides: Any) -> GroupConsumer:
        consumer = GroupConsumer(fast_config(zk_connect, **overrides), subscription)
        made.append(consumer)
        if start:
            consumer.start()
        return consumer

    yield make
    for consumer in made:
        consumer.close()


@pytest.fixture
def proc_members(zk_connect: str) -> Iterator[Callable[..., ProcMember]]:
    made: list[ProcMember] = []

    def make(topic: str = "t", session_ms: int = 2000) -> ProcMember:
        m = ProcMember(zk_connect, topic, session_ms)
        made.append(m)
        return m

    yield make
    for m in made:
        if m.proc.poll() is None:
            m.kill()
