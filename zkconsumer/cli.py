"""The ``zkconsumer`` command: one entry point, one sub-command per job.

Each sub-command lives in the package that owns the job (``zkconsumer.broker.cli`` for the dev
broker, ``zkconsumer.consumer.cli`` for ``group``, ...).  A command module exposes:

* ``HELP: str`` -- the one-line summary shown by ``zkconsumer --help``;
* ``configure(parser: argparse.ArgumentParser) -> None`` -- adds its flags (and nested
  sub-commands, e.g. ``offsets export``);
* ``main(args: argparse.Namespace) -> int`` -- runs it and returns the exit status.

This module is the only place that configures logging, and it turns `ZkConsumerError` into a
one-line message and exit status 1 (a traceback only with ``--debug``), because an operator
reading "broker error 1: offset out of range [topic=t, partition=0]" needs no stack.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from zkconsumer.errors import ZkConsumerError

# (command, module).  Order is the order of `zkconsumer --help`.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("demo", "zkconsumer.devcluster.demo"),
    ("dev-cluster", "zkconsumer.devcluster.cli"),
    ("broker", "zkconsumer.broker.cli"),
    ("produce", "zkconsumer.producer.cli"),
    ("fetch", "zkconsumer.client.cli"),
    ("run", "zkconsumer.daemon.cli"),
    ("group", "zkconsumer.consumer.cli"),
    ("offsets", "zkconsumer.migrate.offsets_cli"),
    ("logdir", "zkconsumer.migrate.logdir_cli"),
    ("export", "zkconsumer.spark.cli"),
    ("mirror", "zkconsumer.mirror.cli"),
    ("bench", "zkconsumer.bench.cli"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zkconsumer",
        description=(
            "Kafka 0.7 tooling for ZooKeeper-coordinated clusters: run a consumer-group member "
            "that shares a group with Scala consumers, produce, inspect groups and offsets, "
            "run a 0.7-compatible dev broker, and migrate data off 0.7."
        ),
    )
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="logging level for messages on stderr (default: INFO)")
    parser.add_argument("--debug", action="store_true",
                        help="show full tracebacks for errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that command is not built yet
            raise
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(cmd)
        cmd.set_defaults(_main=module.main)
    return parser


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, getattr(logging, level)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    configure_logging(args.log_level)
    try:
        return int(args._main(args) or 0)
    except ZkConsumerError as exc:
        if args.debug:
            raise
        print(f"zkconsumer {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
