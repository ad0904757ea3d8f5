"""``df.write.format("kafka07")``: rows produced through the Producer, read back exactly."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from fixtures.waiting import wait_until

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

pytestmark = pytest.mark.slow


def test_write_round_trip_keys_and_topic_column(spark: Any, dev_broker: Any, zk_connect: str,
                                                zk_session: ZkSession) -> None:
    from pyspark.errors import AnalysisException

    brokers = [dev_broker(num_partitions=3) for _ in range(2)]
    # Create the topic first: for a topic ZooKeeper does not know yet, a 0.7 producer uses
    # only partition 0 of each broker (REFERENCE §4.7), so keys would map differently.
    for b in brokers:
        with BrokerConnection(b.host, b.port) as conn:
            produce(conn, "written", 0, encode_message_set([]), confirm=True)
    wait_until(lambda: read_topic_partitions(zk_session, "written") == {0: 3, 1: 3},
               what="topic registration")
    rows = [(f"value-{i}", f"key-{i % 7}") for i in range(300)]
    df = spark.createDataFrame(rows, "value string, key string").repartition(3)
    (df.write.format("kafka07").mode("append").option("zookeeper.connect", zk_connect)
     .option("topic", "written").option("compression", "gzip").save())
    back = (spark.read.format("kafka07").option("zookeeper.connect", zk_connect)
            .option("topic", "written").load().collect())
    assert Counter(bytes(r.value).decode() for r in back) == Counter(v for v, _ in rows)
    # the key chose the partition: every key's rows sit in one (broker, partition)
    where: dict[str, set[tuple[int, int]]] = {}
    key_of = dict(rows)
    for r in back:
        where.setdefault(key_of[bytes(r.value).decode()], set()).add((r.broker_id, r.partition))
    assert all(len(places) == 1 for places in where.values())
    # rows are grouped by destination partition: at most one gzip wrapper (one shallow offset)
    # per partition per task (3 tasks x 6 partitions), not one per row of varying keys
    assert len({(r.broker_id, r.partition, r.offset) for r in back}) <= 3 * 6

    # binary values and a topic column (no topic option)
    binary = spark.createDataFrame([(b"\x00\xff%d" % i, "other") for i in range(20)],
                                   "value binary, topic string")
    binary.write.format("kafka07").mode("append").option("zookeeper.connect", zk_connect).save()
    wait_until(lambda: read_topic_partitions(zk_session, "other"), what="topic registration")
    got = (spark.read.format("kafka07").option("zookeeper.connect", zk_connect)
           .option("topic", "other").load().collect())
    assert sorted(bytes(r.value) for r in got) == sorted(b"\x00\xff%d" % i for i in range(20))

    # a task that fails reports nothing: the save fails with the task's reason
    nulls = spark.createDataFrame([("ok", "a"), ("ok", "b"), (None, "c")],
                                  "value string, key string").coalesce(1)
    with pytest.raises(Exception, match="null value"):
        (nulls.write.format("kafka07").mode("append").option("zookeeper.connect", zk_connect)
         .option("topic", "written").save())
    # ... and sent nothing of the batch holding the bad row (the batch is checked first)
    assert (spark.read.format("kafka07").option("zookeeper.connect", zk_connect)
            .option("topic", "written").load().count()) == len(rows)

    with pytest.raises(Exception, match="append"):
        (df.write.format("kafka07").mode("overwrite").option("zookeeper.connect", zk_connect)
         .option("topic", "written").save())
    with pytest.raises(AnalysisException, match="value"):
        (spark.createDataFrame([(1,)], "n int").write.format("kafka07").mode("append")
         .option("zookeeper.connect", zk_connect).option("topic", "written").save())
