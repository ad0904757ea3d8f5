"""``zkconsumer export``: drain a Kafka 0.7 topic into Parquet/JSON files with Spark.

Two sources::

    zkconsumer export --zk ZK --topic T --to DIR [--from earliest|group:G|previous|FILE]
                      [--until latest|FILE] [--format parquet|json] [--master local[*]]
    zkconsumer export --log-dir LOGDIR --topic T --to DIR        # a (dead) broker's log.dir

It prints a progress line on stderr (only when stderr is a terminal, or with ``--progress``)
and ends with a summary: rows, log bytes, partitions, time (and the JVM start-up separately).
The end offsets go to ``DIR/_zkconsumer_offsets.json``; ``--from previous`` continues there.
pyspark is imported only when the command runs, so ``zkconsumer --help`` works without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from zkconsumer.errors import ConfigurationError

HELP = "export a Kafka 0.7 topic (live cluster or log directory) to Parquet/JSON with Spark"


EPILOG = """\
Offsets are 0.7 byte positions.  --from / --until FILE: a JSON offsets file as written to
DIR/_zkconsumer_offsets.json (or by `offsets export --format json`).  Rows: topic, broker_id,
partition, offset, next_offset, value.  Needs pyspark (pip install 'zkconsumer[spark]').

examples:
  zkconsumer export --zk zk1:2181/kafka --topic orders --to /data/orders
  zkconsumer export --zk zk1:2181/kafka --topic orders --to /data/orders --from previous
  zkconsumer export --zk zk1:2181/kafka --pattern 'logs-.*' --to /data/logs --format json
  zkconsumer export --log-dir /mnt/broker3/kafka-logs --topic orders --broker-id 3 --to /data/b3

exit status: 0 exported, 1 error (unknown topic, unreadable offsets file, Spark failure), 2 usage
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
    parser.add_argument("--to", required=True, metavar="DIR",
                        help="output directory (files are added; created if missing)")
    parser.add_argument("--format", choices=["parquet", "json"], default="parquet",
                        help="output format (default parquet)")
    parser.add_argument("--from", dest="start", default="earliest",
                        metavar="earliest|group:G|previous|FILE",
                        help="where to start (default earliest; group:G = group G's committed "
                             "offsets; previous = DIR/_zkconsumer_offsets.json)")
    parser.add_argument("--until", default="latest", metavar="latest|FILE",
                        help="where to stop (default: the latest offsets at start)")
    parser.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    parser.add_argument("--max-split-bytes", type=int, metavar="N",
                        help="merge segments into Spark tasks of up to N bytes")
    parser.add_argument("--num-partitions", type=int, metavar="N",
                        help="partitions per broker (with --broker-list; default 1)")
    parser.add_argument("--broker-id", type=int, metavar="ID",
                        help="broker id to put in the rows (with --log-dir; default none: "
                             "broker_id is null)")
    parser.add_argument("--progress", action="store_true",
                        help="show the progress line even when stderr is not a terminal")


def _offsets_arg(value: str, out_dir: str, flag: str) -> str:
    """earliest/latest/group:G pass through; previous/FILE become offsets JSON."""
    from zkconsumer.spark.export import OFFSETS_FILE, load_offsets_file

    if value in ("earliest", "latest") or value.startswith("group:"):
        return value
    path = str(Path(out_dir) / OFFSETS_FILE) if value == "previous" else value
    if not Path(path).exists():
        raise ConfigurationError(f"{flag} {value}: {path} does not exist")
    return json.dumps(load_offsets_file(path))


def build_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``kafka07`` options for the CLI flags (validated later by the source's parser)."""
    if not args.log_dir and not args.topic and not args.pattern:
        raise ConfigurationError("give --topic T[,T2...] or --pattern REGEX (only --log-dir "
                                 "exports every topic by default)")
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
    options["startingOffsets"] = _offsets_arg(args.start, args.to, "--from")
    options["endingOffsets"] = _offsets_arg(args.until, args.to, "--until")
    return options


def main(args: argparse.Namespace) -> int:
    from zkconsumer.spark.export import run_export

    options = build_options(args)
    result = run_export(options, args.to, fmt=args.format, master=args.master,
                        progress=args.progress or sys.stderr.isatty())
    rate = result.rows / result.seconds if result.seconds else 0.0
    print(f"exported {result.rows} rows ({result.bytes} log bytes) from {result.partitions} "
          f"partitions to {args.to} in {result.seconds:.1f}s "
          f"(Spark start-up {result.startup_seconds:.1f}s; {rate:.0f} rows/s overall); "
          f"offsets recorded in {Path(args.to) / '_zkconsumer_offsets.json'}")
    return 0
