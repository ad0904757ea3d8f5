"""Spark batch reads of broker log directories (segment files), through auto-registration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkconsumer.client.logdir import discover, iter_partition
from zkconsumer.protocol import Compression, encode_message_set
from zkconsumer.protocol.logformat import segment_name

pytestmark = pytest.mark.slow


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((r.topic, r.broker_id, r.partition, r.offset, r.next_offset, bytes(r.value))
                  for r in df.collect())


def _write_log(root: Path) -> None:
    segs = {
        "orders-0": [encode_message_set([b"o%d" % i for i in range(50)]),
                     encode_message_set([b"z%d" % i for i in range(20)],
                                        compression=Compression.GZIP),
                     encode_message_set([b"s%d" % i for i in range(30)],
                                        compression=Compression.SNAPPY)],
        "orders-1": [encode_message_set([b"p1-%d" % i for i in range(10)])],
        "other-topic-0": [encode_message_set([b"x"])],
    }
    for name, datas in segs.items():
        d = root / name
        d.mkdir(parents=True)
        start = 0
        for data in datas:
            (d / segment_name(start)).write_bytes(data)
            start += len(data)
    # a torn tail in the last segment of orders-1
    last = root / "orders-1" / segment_name(0)
    last.write_bytes(last.read_bytes() + encode_message_set([b"torn"])[:-2])


def test_logdir_read_matches_the_segment_reader(spark: Any, tmp_path: Path) -> None:
    _write_log(tmp_path)
    df = spark.read.format("kafka07").option("topic", "orders").option("brokerId", "3") \
        .load(str(tmp_path))
    assert df.schema.simpleString() == ("struct<topic:string,broker_id:int,partition:int,"
                                        "offset:bigint,next_offset:bigint,value:binary>")
    assert df.rdd.getNumPartitions() == 4  # one task per segment file
    expected = sorted(("orders", 3, p.partition, o, n, v)
                      for p in discover(str(tmp_path), topics=["orders"])
                      for o, n, v in iter_partition(p))
    assert len(expected) == 50 + 20 + 30 + 10
    assert _rows(df) == expected
    everything = spark.read.format("kafka07").option("logDir", str(tmp_path)).load()
    assert everything.filter("topic = 'other-topic'").count() == 1
    assert everything.filter("broker_id is null").count() == 111


def test_corruption_names_the_file_or_is_skipped(spark: Any, tmp_path: Path) -> None:
    _write_log(tmp_path)
    seg = tmp_path / "orders-1" / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[12] ^= 0x01  # first payload byte of the first message
    seg.write_bytes(bytes(data))
    df = spark.read.format("kafka07").option("topic", "orders").load(str(tmp_path))
    with pytest.raises(Exception, match="CorruptSegmentError") as info:
        df.count()
    assert f"{seg} at file position 0" in str(info.value)
    skipping = (spark.read.format("kafka07").option("topic", "orders")
                .option("skipCorrupt", "true").load(str(tmp_path)))
    assert skipping.count() == 100  # orders-1 (10 messages) is lost from the bad byte on


def test_a_missing_segment_is_data_loss_not_silence(spark: Any, tmp_path: Path) -> None:
    _write_log(tmp_path)
    gz = sorted((tmp_path / "orders-0").glob("*.kafka"))[1]
    gz.unlink()  # the gzip segment (20 messages) is gone
    df = spark.read.format("kafka07").option("topic", "orders").load(str(tmp_path))
    with pytest.raises(Exception, match="gaps between its segment files") as info:
        df.count()
    assert str(tmp_path / "orders-0") in str(info.value) and "missing" in str(info.value)
    around = (spark.read.format("kafka07").option("topic", "orders")
              .option("failOnDataLoss", "false").load(str(tmp_path)))
    assert around.count() == 50 + 30 + 10
