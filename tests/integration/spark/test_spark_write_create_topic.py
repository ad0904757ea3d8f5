"""``createTopic=true``: a keyed write to a new topic spreads over every live broker (22.14).

Before: the topic was created by the first row on one broker, and all 20,000 keyed rows of
the issue's run stayed on that broker's partitions.
"""

from __future__ import annotations

from typing import Any

import pytest

from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

pytestmark = pytest.mark.slow


def test_keyed_write_with_create_topic_reaches_every_broker(
        spark: Any, dev_broker: Any, zk_connect: str, zk_session: ZkSession) -> None:
    dev_broker.many(2, num_partitions=2)
    rows = [(f"value-{i}", f"key-{i}") for i in range(400)]
    (spark.createDataFrame(rows, "value string, key string").coalesce(1)
     .write.format("kafka07").mode("append").option("zookeeper.connect", zk_connect)
     .option("topic", "fresh").option("createTopic", "true").save())
    assert read_topic_partitions(zk_session, "fresh") == {0: 2, 1: 2}
    back = (spark.read.format("kafka07").option("zookeeper.connect", zk_connect)
            .option("topic", "fresh").load().collect())
    assert sorted(bytes(r.value).decode() for r in back) == sorted(v for v, _ in rows)
    assert {r.broker_id for r in back} == {0, 1}
