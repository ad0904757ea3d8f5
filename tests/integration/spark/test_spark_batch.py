"""Batch reads of a live cluster with ``spark.read.format("kafka07")`` (real brokers, real ZK)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kafka07_data import ProducedCluster, collect_rows

from zkconsumer.zk.offsets import commit_offset
from zkconsumer.zk.session import ZkSession

pytestmark = pytest.mark.slow


def _reader(spark: Any, cluster: ProducedCluster, **options: str) -> Any:
    r = spark.read.format("kafka07").option("zookeeper.connect", cluster.zk_connect) \
        .option("topic", cluster.topic)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_rows_equal_what_was_produced_with_segment_splits(spark: Any,
                                                          produced_cluster: ProducedCluster
                                                          ) -> None:
    expected = produced_cluster.rows()
    assert len(expected) == 3 * 4 * (7 + 5 + 4)
    segments = [f for b in produced_cluster.brokers for f in b.log_dir.glob("events-*/*.kafka")
                if f.stat().st_size > 0]
    assert len(segments) >= 12  # ~1 kB per partition in 300-byte segments
    split = _reader(spark, produced_cluster, maxSplitBytes="1")  # one task per segment
    merged = _reader(spark, produced_cluster, maxSplitBytes="800")  # pairs of ~380-byte segments
    whole = _reader(spark, produced_cluster, maxSplitBytes=str(1 << 30))
    assert split.rdd.getNumPartitions() == len(segments)
    assert 4 < merged.rdd.getNumPartitions() < len(segments)
    assert whole.rdd.getNumPartitions() == 4
    assert collect_rows(split) == expected
    assert collect_rows(merged) == expected
    assert collect_rows(whole) == expected


def test_group_start_json_end_and_brokers_option(spark: Any, produced_cluster: ProducedCluster,
                                                 zk_session: ZkSession) -> None:
    expected = produced_cluster.rows()
    by_part: dict[str, list[tuple[Any, ...]]] = {}
    for row in expected:
        by_part.setdefault(f"{row[1]}-{row[2]}", []).append(row)
    # group committed 0-0 after its 10th message and 1-1 after its 20th; others missing
    commit_offset(zk_session, "g", "events", "0-0", by_part["0-0"][9][4])
    commit_offset(zk_session, "g", "events", "1-1", by_part["1-1"][19][4])
    start_00, start_11 = by_part["0-0"][9][4], by_part["1-1"][19][4]
    end_01 = by_part["0-1"][30][3]  # stop before the 31st message of 0-1
    ending = json.dumps({"events": {"0-1": end_01}})
    df = _reader(spark, produced_cluster, startingOffsets="group:g", endingOffsets=ending,
                 maxSplitBytes="1000")
    want = sorted(r for r in expected
                  if not (r[1:3] == (0, 0) and r[3] < start_00)
                  and not (r[1:3] == (1, 1) and r[3] < start_11)
                  and not (r[1:3] == (0, 1) and r[3] >= end_01))
    assert collect_rows(df) == want

    b0 = produced_cluster.brokers[0]
    direct = (spark.read.format("kafka07").option("brokers", f"0:{b0.host}:{b0.port}")
              .option("topic", "events").option("numPartitions", "2").load())
    assert collect_rows(direct) == [r for r in expected if r[1] == 0]


def test_bad_options_fail_at_load_naming_the_option(spark: Any,
                                                    produced_cluster: ProducedCluster) -> None:
    from pyspark.errors import AnalysisException

    for options, needle in [({"startingOffsets": "bogus"}, "startingOffsets"),
                            ({"maxSplitBytes": "lots"}, "maxSplitBytes"),
                            ({"endingOffsets": '{"events": {"0-0": "x"}}'}, "endingOffsets")]:
        with pytest.raises(AnalysisException, match=needle):
            _reader(spark, produced_cluster, **options)
    with pytest.raises(AnalysisException, match=r"zookeeper\.connect, brokers or logDir"):
        spark.read.format("kafka07").option("topic", "events").load()
    # a topic name or regex that selects nothing fails at load, naming option and ZooKeeper
    zk = produced_cluster.zk_connect
    with pytest.raises(AnalysisException, match=r"option pattern: no topic .* matches 'nope\.\*'"):
        (spark.read.format("kafka07").option("zookeeper.connect", zk)
         .option("pattern", "nope.*").load())
    with pytest.raises(AnalysisException, match="option topic: nope not registered"):
        spark.read.format("kafka07").option("zookeeper.connect", zk).option("topic", "nope").load()
    # a start outside the log is only known once the brokers are asked: at the action
    df = _reader(spark, produced_cluster,
                 startingOffsets=json.dumps({"events": {"0-0": 10**9}}))
    with pytest.raises(Exception, match="startingOffsets") as info:
        df.count()
    assert "outside the log" in str(info.value)
