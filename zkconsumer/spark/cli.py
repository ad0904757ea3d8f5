"""``zkconsumer export``: drain a Kafka 0.7 topic into Parquet/JSON files with Spark.

Two sources::

    zkconsumer export --zk ZK --topic T --to OUT [--from earliest|group:G|previous|FILE]
                      [--until latest|FILE] [--format parquet|json] [--master local[*]]
                      [--conf KEY=VALUE ...]
    zkconsumer export --log-dir LOGDIR --topic T --to OUT [--skip-corrupt]   # a dead broker

``OUT`` (and an offsets ``FILE``) is anything Spark can write: a path, ``file://``,
``hdfs://``, ``s3a://``...  It prints a progress line on stderr (only when stderr is a terminal,
or with ``--progress``) and ends with a summary: rows, log bytes, partitions, time (and the JVM
start-up separately), then one line per range the executors skipped (torn tails, corruption
skipped with ``--skip-corrupt``).  The end offsets go to ``OUT/_zkconsumer_offsets.json``;
``--from previous`` continues there.  pyspark is imported only when the command runs, so
``zkconsumer --help`` works without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from zkconsumer.errors import ConfigurationError, UsageError
from zkconsumer.extras import require
from zkconsumer.properties import parse_settings
from zkconsumer.zk.security_config import (
    add_zk_security_arguments,
    zk_security_from,
    zk_security_options,
)

HELP = "export a Kafka 0.7 topic (live cluster or log directory) to Parquet/JSON with Spark"


EPILOG = """\
Offsets are 0.7 byte positions.  --from / --until FILE: a JSON offsets file as written to
OUT/_zkconsumer_offsets.json (or by `offsets export --format json`), read through the same
Hadoop filesystem as OUT.  Rows: topic, broker_id, partition, offset, next_offset, value.
OUT is a path or any URI Spark writes (file://, hdfs://, s3a://); on a multi-host cluster it
must be a filesystem every executor and the driver share (see docs/spark.md).
Needs pyspark (pip install 'zkconsumer[spark]').

examples:
  zkconsumer export --zk zk1:2181/kafka --topic orders --to /data/orders
  zkconsumer export --zk zk1:2181/kafka --topic orders --to /data/orders --from previous
  zkconsumer export --zk zk1:2181/kafka --pattern 'logs-.*' --to /data/logs --format json
  zkconsumer export --zk zk1:2181/kafka --topic orders --to hdfs://nn:8020/m/orders \\
      --master spark://spark1:7077 --conf spark.executor.memory=4g
  zkconsumer export --log-dir /mnt/broker3/kafka-logs --topic orders --broker-id 3 --to /data/b3
  zkconsumer export --log-dir /mnt/broker3/kafka-logs --to /data/b3 --skip-corrupt

exit status: 0 exported (skipped ranges, if any, are listed), 1 error (unknown topic,
unreadable offsets file, a corrupt segment without --skip-corrupt, Spark failure), 2 usage
(e.g. --skip-corrupt without --log-dir)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--zk", metavar="HOST:PORT[,...][/chroot]",
                     help="ZooKeeper connect string of the 0.7 cluster, chroot included "
                          "(zk.connect)")
    src.add_argument("--broker-list", "--brokers", dest="brokers", metavar="ID:HOST:PORT,...",
                     help="static brokers instead of ZooKeeper (broker.list)")
    src.add_argument("--log-dir", metavar="LOGDIR", help="a broker's log.dir on disk")
    parser.add_argument("--topic", help="topic name or comma list (this or --pattern; "
                                        "--log-dir: default every topic)")
    parser.add_argument("--pattern", metavar="REGEX", help="topic regex instead of --topic")
    parser.add_argument("--to", required=True, metavar="OUT",
                        help="output directory, a path or a URI such as file:///data/o or "
                             "hdfs://nn/o (files are added; created if missing)")
    parser.add_argument("--format", choices=["parquet", "json"], default="parquet",
                        help="output format (default parquet)")
    parser.add_argument("--from", dest="start", default="earliest",
                        metavar="earliest|group:G|previous|FILE",
                        help="where to start (default earliest; group:G = group G's committed "
                             "offsets; previous = OUT/_zkconsumer_offsets.json)")
    parser.add_argument("--until", default="latest", metavar="latest|FILE",
                        help="where to stop (default: the latest offsets at start)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session, e.g. spark.executor.memory=4g "
                             "(repeatable)")
    parser.add_argument("--skip-corrupt", action="store_true",
                        help="--log-dir: on a corrupt message, skip the rest of that segment "
                             "file and report it, instead of failing")
    parser.add_argument("--max-split-bytes", type=int, metavar="N",
                        help="merge segments into Spark tasks of up to N bytes")
    parser.add_argument("--num-partitions", type=int, metavar="N",
                        help="partitions per broker (with --broker-list; default 1)")
    parser.add_argument("--broker-id", type=int, metavar="ID",
                        help="broker id to put in the rows (with --log-dir; default none: "
                             "broker_id is null)")
    parser.add_argument("--progress", action="store_true",
                        help="show the progress line even when stderr is not a terminal")
    add_zk_security_arguments(parser)


def _offsets_arg(spark: Any, value: str, out: str, flag: str) -> str:
    """earliest/latest/group:G pass through; previous/FILE become offsets JSON."""
    from zkconsumer.spark.export import OFFSETS_FILE, load_offsets
    from zkconsumer.spark.hadoopfs import OutputDir

    if value in ("earliest", "latest") or value.startswith("group:"):
        return value
    location = OutputDir(spark, out).child(OFFSETS_FILE) if value == "previous" else value
    return json.dumps(load_offsets(spark, location, f"{flag} {value}"))


def build_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``kafka07`` options for the CLI flags, offsets aside (see `main`)."""
    if not args.log_dir and not args.topic and not args.pattern:
        raise ConfigurationError("give --topic T[,T2...] or --pattern REGEX (only --log-dir "
                                 "exports every topic by default)")
    if args.skip_corrupt and not args.log_dir:
        raise UsageError("--skip-corrupt applies to --log-dir exports (a broker checks every "
                         "message when it is written)")
    options: dict[str, str] = {}
    if args.zk:
        options["zookeeper.connect"] = args.zk
    elif args.brokers:
        options["brokers"] = args.brokers
    else:
        options["logDir"] = args.log_dir
    for flag, key in (("topic", "topic"), ("pattern", "pattern"),
                      ("max_split_bytes", "maxSplitBytes"), ("num_partitions", "numPartitions"),
                      ("broker_id", "brokerId")):
        value = getattr(args, flag)
        if value is not None:
            options[key] = str(value)
    if args.skip_corrupt:
        options["skipCorrupt"] = "true"
    if args.zk:  # paths and user names only: Spark logs its options
        options.update(zk_security_options(zk_security_from(args)))
    return options


def main(args: argparse.Namespace) -> int:
    require("spark", "zkconsumer export")
    from zkconsumer.spark.export import run_export
    from zkconsumer.spark.session import build_session

    options = build_options(args)
    conf = parse_settings(args.conf, "--conf")
    # Spark logs a failed task's JVM and Python traces (pages of them) before the action
    # raises; the command says what failed in one line instead, so Spark's log is off unless
    # asked for.
    verbose = getattr(args, "debug", False) or getattr(args, "log_level", "") == "DEBUG"
    spark, startup = build_session(args.master, app_name="zkconsumer-export", conf=conf,
                                   log_level="WARN" if verbose else "OFF")
    # Offsets files are read through Spark's filesystem (a URI works), so after the session.
    options["startingOffsets"] = _offsets_arg(spark, args.start, args.to, "--from")
    options["endingOffsets"] = _offsets_arg(spark, args.until, args.to, "--until")
    result = run_export(options, args.to, fmt=args.format, spark=spark,
                        progress=args.progress or sys.stderr.isatty())
    result.startup_seconds = startup
    total = startup + result.seconds
    rate = result.rows / total if total else 0.0
    print(f"exported {result.rows} rows ({result.bytes} log bytes) from {result.partitions} "
          f"partitions to {result.output} in {total:.1f}s "
          f"(Spark start-up {startup:.1f}s; {rate:.0f} rows/s overall); "
          f"offsets recorded in {result.record}")
    if result.skipped:
        print(f"skipped {len(result.skipped)} ranges, "
              f"{sum(s.bytes for s in result.skipped)} log bytes not exported:")
        for skipped in result.skipped:
            print(f"  {skipped.describe()}")
    return 0
