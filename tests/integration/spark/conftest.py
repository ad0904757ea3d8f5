"""Fixtures of the Spark integration tests: `produced_cluster` (helpers in kafka07_data.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures.waiting import wait_until
from kafka07_data import ProducedCluster, fill

from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession


@pytest.fixture
def produced_cluster(dev_broker: Any, zk_connect: str, zk_session: ZkSession) -> ProducedCluster:
    brokers = [dev_broker(num_partitions=2, log_file_size=300) for _ in range(2)]
    cluster = ProducedCluster(zk_connect, brokers, "events")
    fill(cluster, 3)
    wait_until(lambda: read_topic_partitions(zk_session, "events") == {0: 2, 1: 2},
               what="topic registration on both brokers")
    return cluster
