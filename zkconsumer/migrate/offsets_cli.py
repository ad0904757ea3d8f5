"""``zkconsumer offsets``: query a broker's offsets, and export / import / reset group offsets.

* ``zkconsumer offsets --broker HOST:PORT --topic T --partition P [--time -1|-2|MS] [--max N]``
  prints the broker's answer to one offsets request (descending, one per line) -- the
  ``getOffsetsBefore`` of 0.7's GetOffsetShell.
* ``offsets export --zk ZK [--group G ...] [--format scala|json] [--output FILE]``
  (ExportZkOffsets; all groups if no ``--group``).
* ``offsets import --zk ZK FILE [--dry-run] [--force]`` (ImportZkOffsets, validated first,
  refused for groups with live members unless ``--force``).
* ``offsets reset --zk ZK --group G --topic T --to earliest|latest|FILE [--dry-run] [--force]``
  (UpdateOffsetsInZK, checked against the brokers' current earliest/latest).

Import and reset print one line per partition, ``group topic B-P: old -> new``, then a count.
See `zkconsumer.migrate.offsets` for the formats and the safety rules.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from zkconsumer.client import parse_broker_address, query_offsets
from zkconsumer.errors import ConfigurationError
from zkconsumer.migrate.offsets import (
    Change,
    apply_changes,
    export_groups,
    format_json,
    format_scala,
    parse_offsets_text,
    plan_import,
    plan_reset,
)
from zkconsumer.protocol import LATEST_TIME
from zkconsumer.zk.session import ZkSession

HELP = "query a broker's offsets; export, import or reset consumer-group offsets in ZooKeeper"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", metavar="HOST:PORT",
                        help="query this broker's offsets (no sub-command)")
    parser.add_argument("--topic", help="topic (with --broker)")
    parser.add_argument("--partition", type=int, default=0, help="partition (with --broker)")
    parser.add_argument("--time", type=int, default=LATEST_TIME,
                        help="-1 latest (default), -2 earliest, or a time in ms (with --broker)")
    parser.add_argument("--max", type=int, default=1, metavar="N",
                        help="at most N offsets (with --broker; segment starts if N > 1)")
    sub = parser.add_subparsers(dest="offsets_command", metavar="SUBCOMMAND")

    exp = sub.add_parser("export", help="write group offsets to a file (ExportZkOffsets)",
                         description="write group offsets to a file (ExportZkOffsets)")
    exp.add_argument("--zk", required=True, help="ZooKeeper connect string (with chroot)")
    exp.add_argument("--group", action="append",
                     help="group to export (repeatable; default: every group)")
    exp.add_argument("--format", choices=["scala", "json"], default="scala")
    exp.add_argument("--output", metavar="FILE", help="file to write (default: stdout)")

    imp = sub.add_parser("import", help="write group offsets from a file (ImportZkOffsets)",
                         description="write group offsets from a file (ImportZkOffsets)")
    imp.add_argument("--zk", required=True, help="ZooKeeper connect string (with chroot)")
    imp.add_argument("file", metavar="FILE", help="scala-format or JSON offsets file")
    imp.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    imp.add_argument("--force", action="store_true",
                     help="write even if the group has live members")

    reset = sub.add_parser("reset", help="set a group's offsets of a topic (UpdateOffsetsInZK)",
                           description="set a group's offsets of a topic (UpdateOffsetsInZK)")
    reset.add_argument("--zk", required=True, help="ZooKeeper connect string (with chroot)")
    reset.add_argument("--group", required=True)
    reset.add_argument("--topic", dest="reset_topic", required=True, metavar="TOPIC")
    reset.add_argument("--to", required=True, metavar="earliest|latest|FILE")
    reset.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    reset.add_argument("--force", action="store_true",
                       help="write even if the group has live members")


def _query(args: argparse.Namespace) -> int:
    if not args.broker or not args.topic:
        raise ConfigurationError("give --broker HOST:PORT and --topic T (or a sub-command: "
                                 "export, import, reset)")
    host, port = parse_broker_address(args.broker)
    for offset in query_offsets(host, port, args.topic, args.partition, args.time, args.max):
        print(offset)
    return 0


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from exc


def _report(changes: list[Change], written: int | None) -> None:
    for c in changes:
        print(c.describe())
    changed = sum(c.changed for c in changes)
    if written is None:
        print(f"dry run: {changed} of {len(changes)} partitions would change; nothing written")
    else:
        print(f"updated {written} of {len(changes)} partitions")


def main(args: argparse.Namespace) -> int:
    command = args.offsets_command
    if command is None:
        return _query(args)
    with ZkSession(args.zk) as session:
        if command == "export":
            offsets = export_groups(session, args.group)
            text = format_json(offsets) if args.format == "json" else format_scala(offsets)
            if args.output:
                Path(args.output).write_text(text, encoding="utf-8")
                count = sum(len(p) for g in offsets.values() for p in g.values())
                print(f"exported {count} offsets of {len(offsets)} group(s) to {args.output}",
                      file=sys.stderr)
            else:
                sys.stdout.write(text)
            return 0
        if command == "import":
            parsed = parse_offsets_text(_read_file(args.file), args.file)
            changes = plan_import(session, parsed, force=args.force)
        else:
            to: str | dict[str, dict[str, dict[str, int]]] = args.to
            if args.to not in ("earliest", "latest"):
                to = parse_offsets_text(_read_file(args.to), args.to)
            changes = plan_reset(session, args.group, args.reset_topic, to, force=args.force)
        written = None if args.dry_run else apply_changes(session, changes)
        _report(changes, written)
        return 0
