"""Partial writes: ``validateFirst=true`` checks a task's rows before sending any (22.15).

Before: a write whose second Arrow batch held a null value failed after its first batch was
produced -- those rows stayed in the topic.  Without the option that is still what happens
(documented: atomic per batch, not per task); with it the task sends nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from zkconsumer.client import SimpleConsumer

pytestmark = pytest.mark.slow

ROWS = [(f"v{i}",) for i in range(250)] + [(None,)]  # the null is in the 3rd batch of 100


@pytest.fixture
def small_batches(spark: Any) -> Iterator[None]:
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "100")
    yield
    spark.conf.set(key, old)


def _write(spark: Any, zk_connect: str, topic: str, **options: str) -> None:
    df = spark.createDataFrame(ROWS, "value string").coalesce(1)
    with pytest.raises(Exception, match="null value"):
        (df.write.format("kafka07").mode("append").option("zookeeper.connect", zk_connect)
         .option("topic", topic).options(**options).save())


def _count(broker: Any, topic: str) -> int:
    with SimpleConsumer(broker.host, broker.port) as consumer:
        try:
            return sum(1 for _ in consumer.iter_messages(topic, 0, 0))
        except Exception:  # the topic was never created: nothing was sent
            return 0


def test_validate_first_sends_nothing_of_a_bad_task(spark: Any, small_batches: None,
                                                    dev_broker: Any, zk_connect: str) -> None:
    broker = dev_broker(num_partitions=1)
    _write(spark, zk_connect, "checked", validateFirst="true")
    assert _count(broker, "checked") == 0
    _write(spark, zk_connect, "unchecked")  # the default: atomic per batch of 100 rows
    assert _count(broker, "unchecked") == 200
