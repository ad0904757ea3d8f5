"""Streaming reads: availableNow with a byte budget, restart from the checkpoint, ZK commits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka07_data import ProducedCluster, collect_rows, fill

from zkconsumer.zk.offsets import commit_offset, read_group_offsets
from zkconsumer.zk.session import ZkSession

pytestmark = pytest.mark.slow


def _run(spark: Any, cluster: ProducedCluster, out: Path, ckpt: Path) -> None:
    q = (spark.readStream.format("kafka07")
         .option("zookeeper.connect", cluster.zk_connect).option("topic", cluster.topic)
         .option("maxBytesPerTrigger", "1500").option("commitToGroup", "spark-g").load()
         .writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
    q.awaitTermination()
    assert q.exception() is None


def _batches(ckpt: Path) -> dict[int, dict[str, dict[str, int]]]:
    """batch id -> end offsets, read from Spark's checkpoint (3rd line of offsets/<id>)."""
    return {int(f.name): json.loads(f.read_text().splitlines()[2])
            for f in (ckpt / "offsets").iterdir() if f.name.isdigit()}


def test_available_now_restart_is_exact_and_group_follows_the_checkpoint(
        spark: Any, produced_cluster: ProducedCluster, zk_session: ZkSession,
        tmp_path: Path) -> None:
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _run(spark, produced_cluster, out, ckpt)
    batches = _batches(ckpt)
    last = max(batches)
    assert last >= 2  # ~4.6 kB backlog in 1500-byte triggers
    assert batches[last] == produced_cluster.latest()
    assert collect_rows(spark.read.parquet(str(out))) == produced_cluster.rows()
    # the drain's final check commits the last batch's end (Spark's own commit(end) of the
    # last batch never comes: no batch after it is planned)
    assert read_group_offsets(zk_session, "spark-g") == batches[last]

    # A group left one batch behind (as older versions did) is brought to the checkpoint's
    # end by a restart that finds no new data -- and that restart plans no batch.
    for key, offset in batches[last - 1]["events"].items():
        commit_offset(zk_session, "spark-g", "events", key, offset)
    _run(spark, produced_cluster, out, ckpt)
    assert max(_batches(ckpt)) == last
    assert read_group_offsets(zk_session, "spark-g") == batches[last]

    fill(produced_cluster, 1, tag="more-")
    _run(spark, produced_cluster, out, ckpt)
    rows = collect_rows(spark.read.parquet(str(out)))
    assert len(rows) == len(set(rows))  # no duplicates across the restart
    assert rows == produced_cluster.rows()  # and nothing lost
    batches = _batches(ckpt)
    assert batches[max(batches)] == produced_cluster.latest()
    assert read_group_offsets(zk_session, "spark-g") == batches[max(batches)]


def test_processing_time_trigger_follows_the_log(spark: Any, produced_cluster: ProducedCluster
                                                 ) -> None:
    from fixtures.waiting import wait_until

    q = (spark.readStream.format("kafka07")
         .option("zookeeper.connect", produced_cluster.zk_connect)
         .option("topic", produced_cluster.topic).load()
         .writeStream.format("memory").queryName("kafka07_follow")
         .trigger(processingTime="500 milliseconds").start())
    try:
        def seen() -> int:
            if q.exception() is not None:  # a dead query: say why (reported at the timeout)
                raise AssertionError(f"the query failed: {q.exception()}")
            return int(spark.sql("select count(*) from kafka07_follow").collect()[0][0])

        # micro-batches every 500 ms, but each one plans through a Python worker: on a loaded
        # 2-core machine (load average 10) the backlog took over 60 s once
        wait_until(lambda: seen() == len(produced_cluster.rows()), timeout=180,
                   what="the backlog in the memory sink")
        fill(produced_cluster, 1, tag="live-")
        wait_until(lambda: seen() == len(produced_cluster.rows()), timeout=180,
                   what="new messages picked up by the running query")
        rows = collect_rows(spark.table("kafka07_follow"))
        assert rows == produced_cluster.rows()
    finally:
        q.stop()


def test_partitions_of_a_stopped_broker_keep_their_offsets(
        spark: Any, produced_cluster: ProducedCluster, dev_broker: Any, zk_session: ZkSession,
        tmp_path: Path) -> None:
    from fixtures.waiting import wait_until

    from zkconsumer.protocol import Compression
    from zkconsumer.zk.registry import read_topic_partitions

    out, ckpt = tmp_path / "out", tmp_path / "ckpt"

    def run(**options: str) -> None:
        r = (spark.readStream.format("kafka07")
             .option("zookeeper.connect", produced_cluster.zk_connect).option("topic", "events"))
        for k, v in options.items():
            r = r.option(k, v)
        q = (r.load().writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(ckpt)).trigger(availableNow=True).start())
        q.awaitTermination()
        assert q.exception() is None

    run()
    before = _batches(ckpt)[max(_batches(ckpt))]["events"]
    produced_cluster.brokers[1].stop()
    wait_until(lambda: read_topic_partitions(zk_session, "events") == {0: 2},
               what="broker 1 gone from ZooKeeper")
    produced_cluster.produce(0, 0, [b"while-b1-down-%d" % i for i in range(3)])
    run()
    end = _batches(ckpt)[max(_batches(ckpt))]["events"]
    # broker 1's partitions are still in the offsets, where they were (not dropped)
    assert {k: end[k] for k in ("1-0", "1-1")} == {k: before[k] for k in ("1-0", "1-1")}

    produced_cluster.brokers[1] = dev_broker.restart(produced_cluster.brokers[1])
    wait_until(lambda: read_topic_partitions(zk_session, "events") == {0: 2, 1: 2},
               what="broker 1 back")
    produced_cluster.produce(1, 0, [b"back-%d" % i for i in range(3)])
    produced_cluster.produce(1, 0, [b"back-gz-%d" % i for i in range(5)], Compression.GZIP)
    first_new = max(_batches(ckpt)) + 1
    run(maxBytesPerTrigger="1")  # smaller than any message: one shallow message per batch
    assert max(_batches(ckpt)) - first_new + 1 == 4  # 3 plain messages, then the wrapper
    rows = collect_rows(spark.read.parquet(str(out)))
    assert rows == produced_cluster.rows()  # broker 1 resumed where it was: no duplicates
