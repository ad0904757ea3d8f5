"""``zkconsumer bench export``: drain a topic into Parquet with Spark vs. one Python process.

For each payload size (100 B and 1 KiB by default) a topic of ``--bytes`` payload bytes is
produced into a dev broker subprocess (two partitions, ``--segment-bytes`` segments, so the
Spark read is split at segment boundaries), then exported to Parquet twice:

* ``export spark`` -- `zkconsumer.spark.export.run_export` with ``local[2]`` (the ``kafka07``
  source reading through the broker, Arrow batches, Spark's Parquet writer, snappy);
* ``export python`` -- the baseline a migration script would write: one process, a
  `SimpleConsumer.iter_columns` loop per partition, the same Arrow conversion, and
  ``pyarrow.parquet.ParquetWriter`` (snappy) in row groups of about 64 MB.

Spark's fixed costs are reported separately and excluded from the export figures: the JVM
start (``spark start-up``) and the first data-source query, which spawns the planner daemons
(``spark first query``, a one-row warm-up export).  Each Spark case runs ``--spark-runs``
times (default 2): earlier runs are printed as ``spark (run N)``, the last as ``spark`` (JVM
JIT warmed up).  An export's time covers planning (offsets requests), the Spark job and the
row count from the Parquet footers.  Lines end with the figure, e.g.
``export spark 100B: 812345 rows/s (81.2 MB/s)``; MB = 10**6 payload bytes.

The writer case (``writer unkeyed`` / ``writer keyed``, skipped with ``--writer-rows 0``)
times ``df.write.format("kafka07")`` of ``--writer-rows`` rows of the first ``--size`` into a
dev cluster of its own (ZooKeeper + two brokers with two partitions each, topics registered
first so keys route over all four partitions): unkeyed rows, then rows keyed by ``id % 1000``
(strings).  The rows are generated and cached in the JVM before the clock starts, so the time
is the write: Arrow batches to the Python writer, grouping, confirmed sync produce.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from zkconsumer.client import BrokerConnection, SimpleConsumer, produce
from zkconsumer.devcluster.brokers import DevBrokerProcess
from zkconsumer.extras import require
from zkconsumer.protocol import LATEST_TIME, encode_message_set

HELP = "export throughput to Parquet: Spark local[2] vs one Python consumer process"

PARTITIONS = 2


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bytes", type=float, default=200e6,
                        help="payload bytes per size case (default 200e6; 2e9 for the "
                             "'2 GB-class' run if the disk allows)")
    parser.add_argument("--size", type=int, action="append",
                        help="payload size in bytes (repeatable; default 100 and 1024)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024,
                        help="broker log.file.size: segment size, hence Spark split size")
    parser.add_argument("--fetch-size", type=int, default=4 * 1024 * 1024,
                        help="fetch size of both readers (default 4 MiB)")
    parser.add_argument("--only", choices=["spark", "python", "writer"],
                        help="run only one exporter, or only the writer case")
    parser.add_argument("--writer-rows", type=int, default=200_000,
                        help="rows per writer case (default 200000; 0 skips the writer case)")
    parser.add_argument("--writer-compression", default="none",
                        choices=["none", "gzip", "snappy"],
                        help="codec of the writer case (default none)")
    parser.add_argument("--spark-runs", type=int, default=2,
                        help="Spark exports per case; the last is reported as 'export spark' "
                             "(the first also warms the JIT; default 2)")
    parser.add_argument("--work-dir", help="where the broker log and outputs go (default: "
                                           "a temporary directory, removed afterwards)")


def _fill(broker: DevBrokerProcess, topic: str, size: int, total: int) -> int:
    """Produce ``total`` payload bytes of ``size``-byte messages; returns the message count."""
    per_set = max(1, (1024 * 1024) // (size + 10))
    count = max(1, total // size)
    payloads = [(b"%08d" % i + b"m" * size)[:size] for i in range(per_set)]
    data = encode_message_set(payloads)
    sent = 0
    with BrokerConnection(broker.host, broker.port) as conn:
        i = 0
        while sent < count:
            n = min(per_set, count - sent)
            chunk = data if n == per_set else encode_message_set(payloads[:n])
            last = sent + n >= count
            produce(conn, topic, i % PARTITIONS, chunk, confirm=last or i % 64 == 63)
            sent += n
            i += 1
    return sent


def _python_export(host: str, port: int, topic: str, out: Path, fetch_size: int) -> int:
    """The single-process baseline: fetch loop -> Arrow -> pyarrow ParquetWriter."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from zkconsumer.spark.arrow import ARROW_SCHEMA, columns_to_batches

    out.mkdir(parents=True, exist_ok=True)
    rows = 0
    with SimpleConsumer(host, port, fetch_size=fetch_size,
                        max_fetch_size=max(fetch_size, 64 * 1024 * 1024)) as consumer:
        for p in range(PARTITIONS):
            end = consumer.offsets(topic, p, LATEST_TIME, 1)[0]
            with pq.ParquetWriter(str(out / f"part-{p}.parquet"), ARROW_SCHEMA,
                                  compression="snappy") as writer:
                pending: list[pa.RecordBatch] = []
                pending_bytes = 0
                for next_offset, columns in consumer.iter_columns(topic, p, 0):
                    for batch in columns_to_batches(topic, 0, p, columns):
                        pending.append(batch)
                        pending_bytes += batch.nbytes
                        rows += batch.num_rows
                    if pending_bytes >= 64 * 1024 * 1024:
                        writer.write_table(pa.Table.from_batches(pending))
                        pending, pending_bytes = [], 0
                    if next_offset >= end:
                        break
                if pending:
                    writer.write_table(pa.Table.from_batches(pending))
    return rows


def _line(kind: str, size: int, rows: int, seconds: float, what: str = "export") -> None:
    label = f"{size}B" if size % 1024 else f"{size // 1024}KiB"
    rate = rows / seconds if seconds > 0 else 0.0
    print(f"{what} {kind} {label}: {rows} rows in {seconds:.2f}s: {rate:.0f} rows/s "
          f"({rate * size / 1e6:.1f} MB/s)", flush=True)


def _writer_cluster(work: Path) -> Any:
    """The writer case's dev cluster (started before the JVM: forking ZooKeeper and brokers
    from a process that runs a Py4J gateway makes Py4J log spurious connection resets)."""
    from zkconsumer.devcluster.cluster import DevCluster

    return DevCluster(work / "writer-cluster", brokers=2, num_partitions=PARTITIONS,
                      flush_interval=10000, flush_interval_ms=1000,
                      flush_scheduler_interval_ms=200).start()


def _writer_cases(spark: Any, cluster: Any, rows: int, size: int, runs: int,
                  compression: str) -> None:
    """``df.write.format("kafka07")``: unkeyed rows, then keyed rows, into ``cluster``."""
    from zkconsumer.zk.registry import read_topic_partitions
    from zkconsumer.zk.session import ZkSession

    value = (f"CAST(substring(concat(lpad(CAST(id AS STRING), 8, '0'), repeat('m', {size})), "
             f"1, {size}) AS BINARY) AS value")
    cases = {"unkeyed": [value], "keyed": ["CAST(id % 1000 AS STRING) AS key", value]}
    with ZkSession(cluster.zk_connect) as zk:
        for kind, columns in cases.items():
            topic = f"writer-{kind}"
            for broker in cluster.brokers:  # register the topic: keys then use all partitions
                with BrokerConnection(broker.host, broker.port) as conn:
                    produce(conn, topic, 0, encode_message_set([]), confirm=True)
            deadline = time.monotonic() + 30
            while read_topic_partitions(zk, topic) != {0: PARTITIONS, 1: PARTITIONS}:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic} not registered by both brokers")
                time.sleep(0.05)
            df = spark.range(0, rows, numPartitions=PARTITIONS).selectExpr(*columns).cache()
            df.count()
            for run in range(runs):
                t0 = time.monotonic()
                (df.write.format("kafka07").mode("append")
                 .option("zookeeper.connect", cluster.zk_connect).option("topic", topic)
                 .option("compression", compression).save())
                label = kind if run == runs - 1 else f"{kind} (run {run + 1})"
                _line(label, size, rows, time.monotonic() - t0, what="writer")
            df.unpersist()


def main(args: argparse.Namespace) -> int:
    require("spark", "zkconsumer bench export")
    sizes = args.size or [100, 1024]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="zkc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    broker = DevBrokerProcess(0, work / "broker", num_partitions=PARTITIONS,
                              log_file_size=args.segment_bytes, flush_interval=10000,
                              flush_interval_ms=1000, flush_scheduler_interval_ms=200)
    broker.start()
    writer_cluster = None
    try:
        if args.only in (None, "writer") and args.writer_rows > 0:
            writer_cluster = _writer_cluster(work)
        counts = {}
        for size in (sizes if args.only != "writer" else []):
            t0 = time.monotonic()
            counts[size] = _fill(broker, f"bench{size}", size, int(args.bytes))
            _line("produce (setup)", size, counts[size], time.monotonic() - t0)
        _fill(broker, "warmup", 10, 10)
        brokers = f"0:{broker.host}:{broker.port}"
        spark: Any = None
        if args.only != "python":
            from zkconsumer.spark.session import build_session

            spark, startup = build_session(args.master, app_name="zkconsumer-bench-export")
            print(f"spark start-up ({args.master}): {startup:.2f} s", flush=True)
        if args.only in (None, "spark"):
            from zkconsumer.spark.export import run_export

            base = {"brokers": brokers, "numPartitions": str(PARTITIONS),
                    "fetchSize": str(args.fetch_size)}
            t0 = time.monotonic()
            run_export(dict(base, topic="warmup"), str(work / "out-warmup"), spark=spark)
            print(f"spark first query (planner daemons, warm-up): "
                  f"{time.monotonic() - t0:.2f} s", flush=True)
            for size in sizes:
                for run in range(args.spark_runs):
                    out = work / f"out-spark-{size}-{run}"
                    result = run_export(dict(base, topic=f"bench{size}"), str(out), spark=spark)
                    kind = "spark" if run == args.spark_runs - 1 else f"spark (run {run + 1})"
                    _line(kind, size, result.rows, result.seconds)
                    shutil.rmtree(out, ignore_errors=True)
        if spark is not None and writer_cluster is not None:
            _writer_cases(spark, writer_cluster, args.writer_rows, sizes[0], args.spark_runs,
                          args.writer_compression)
        if spark is not None:
            spark.stop()
        if args.only not in ("spark", "writer"):
            for size in sizes:
                t0 = time.monotonic()
                rows = _python_export(broker.host, broker.port, f"bench{size}",
                                      work / f"out-python-{size}", args.fetch_size)
                _line("python", size, rows, time.monotonic() - t0)
    finally:
        if writer_cluster is not None:
            writer_cluster.stop()
        broker.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0
