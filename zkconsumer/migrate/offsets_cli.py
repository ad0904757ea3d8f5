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
import textwrap
from pathlib import Path

from zkconsumer.client import parse_broker_address, query_offsets
from zkconsumer.errors import ConfigurationError, ZnodeDataError
from zkconsumer.migrate.boundaries import check_boundaries
from zkconsumer.migrate.offsets import (
    Change,
    apply_changes,
    export_groups,
    format_json,
    format_scala,
    import_warnings,
    parse_offsets_text,
    plan_import,
    plan_reset,
)
from zkconsumer.protocol import LATEST_TIME
from zkconsumer.zk.paths import group_path
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from
from zkconsumer.zk.session import ZkSession

HELP = "query a broker's offsets; export, import or reset consumer-group offsets in ZooKeeper"


ZK_METAVAR = "HOST:PORT[,...][/chroot]"
ZK_HELP = "ZooKeeper connect string of the 0.7 cluster, chroot included (zk.connect)"
_RAW = argparse.RawDescriptionHelpFormatter

QUERY_EPILOG = """\
Without a sub-command: ask one broker for offsets (0.7's GetOffsetShell).  Offsets are byte
positions.

examples:
  zkconsumer offsets --broker kafka1:9092 --topic orders --partition 0            # latest
  zkconsumer offsets --broker kafka1:9092 --topic orders --time -2                # earliest
  zkconsumer offsets --broker kafka1:9092 --topic orders --time -1 --max 10       # segments
  zkconsumer offsets export --zk zk1:2181/kafka --group billing --output billing.offsets
  zkconsumer offsets SUBCOMMAND --help

exit status: 0 success, 1 error
"""

EXPORT_EPILOG = """\
The scala format is ExportZkOffsets' (one /consumers/G/offsets/T/B-P:OFFSET line per
partition), readable by the Scala ImportZkOffsets and by `offsets import`.

examples:
  zkconsumer offsets export --zk zk1:2181/kafka --output all-groups.offsets
  zkconsumer offsets export --zk zk1:2181/kafka --group billing --format json > billing.json

exit status: 0 success, 1 error (e.g. a --group that does not exist) or an incomplete export:
a committed offset that is not a number (garbage in ZooKeeper) is skipped, named on stderr,
and the rest is written
"""

IMPORT_EPILOG = """\
The whole file is validated first (nothing is written if any line is bad); a group with live
members (/consumers/G/ids not empty) is refused unless --force, because their next autocommit
would overwrite the import.  Prints "group topic B-P: old -> new" per partition.  Offsets of
topics or partitions not registered in /brokers/topics are written too, with a warning on
stderr for each (a typo in the file shows up there).  Every offset is checked against the
broker holding its partition, as reset --to FILE does: one that falls inside a message
(misaligned) rejects the file; one that could not be checked (broker down or not
registered) is written with a warning saying so.

examples:
  zkconsumer offsets import --zk zk1:2181/kafka billing.offsets --dry-run
  zkconsumer offsets import --zk zk1:2181/kafka billing.offsets

exit status: 0 written (or dry run), 1 error (invalid file, misaligned offset, live members,
ZooKeeper)
"""

RESET_EPILOG = """\
--to earliest / latest ask every broker of the topic for its current earliest / latest offset
(UpdateOffsetsInZK); --to FILE takes the offsets of a scala or JSON offsets file, each checked
against the partition's current [earliest, latest] and refused if it falls inside a message
(misaligned; the error names the message boundaries around it).  To repair one partition of
a running group (e.g. a consumer reports "offset 17 of t/0-0 is misaligned"), write a file
with the line /consumers/GROUP/offsets/t/0-0:NEXT_BOUNDARY and pass it with --to, after
stopping the members (or with --force, then restart them).

examples:
  zkconsumer offsets reset --zk zk1:2181/kafka --group billing --topic orders --to latest \\
      --dry-run
  zkconsumer offsets reset --zk zk1:2181/kafka --group billing --topic orders --to billing.json

exit status: 0 written (or dry run), 1 error (unknown topic, bad file, misaligned offset, live
members, ZooKeeper)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = QUERY_EPILOG
    parser.add_argument("--broker", metavar="HOST:PORT",
                        help="query this broker's offsets (no sub-command)")
    parser.add_argument("--topic", help="topic (with --broker)")
    parser.add_argument("--partition", type=int, default=0,
                        help="broker-local partition number (with --broker; default 0)")
    parser.add_argument("--time", type=int, default=LATEST_TIME, metavar="MS",
                        help="-1 latest (default), -2 earliest, or a time in ms since the "
                             "epoch: offsets of segments last written at or before it (with --broker)")
    parser.add_argument("--max", type=int, default=1, metavar="N",
                        help="at most N offsets (with --broker; default 1; segment starts "
                             "if N > 1)")
    sub = parser.add_subparsers(dest="offsets_command", metavar="SUBCOMMAND")

    exp = sub.add_parser("export", help="write group offsets to a file (ExportZkOffsets)",
                         description=textwrap.fill(
                             "Write the committed offsets of consumer groups to a file "
                             "(ExportZkOffsets)."),
                         epilog=EXPORT_EPILOG, formatter_class=_RAW)
    exp.add_argument("--zk", required=True, metavar=ZK_METAVAR, help=ZK_HELP)
    exp.add_argument("--group", action="append", metavar="GROUP",
                     help="group to export (repeatable; default: every group)")
    exp.add_argument("--format", choices=["scala", "json"], default="scala",
                     help="scala: ExportZkOffsets lines (default); json: "
                          '{"group": G, "offsets": {T: {B-P: N}}}')
    exp.add_argument("--output", metavar="FILE", help="file to write (default: stdout)")

    imp = sub.add_parser("import", help="write group offsets from a file (ImportZkOffsets)",
                         description=textwrap.fill(
                             "Write consumer-group offsets from a scala-format or JSON file "
                             "into ZooKeeper (ImportZkOffsets)."),
                         epilog=IMPORT_EPILOG, formatter_class=_RAW)
    imp.add_argument("--zk", required=True, metavar=ZK_METAVAR, help=ZK_HELP)
    imp.add_argument("file", metavar="FILE",
                     help="scala-format or JSON offsets file (as written by offsets export)")
    imp.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    imp.add_argument("--force", action="store_true",
                     help="write even if the group has live members")

    reset = sub.add_parser("reset", help="set a group's offsets of a topic (UpdateOffsetsInZK)",
                           description=textwrap.fill(
                               "Set a consumer group's offsets of one topic to the earliest or "
                               "latest the brokers hold, or to a file's (UpdateOffsetsInZK)."),
                           epilog=RESET_EPILOG, formatter_class=_RAW)
    reset.add_argument("--zk", required=True, metavar=ZK_METAVAR, help=ZK_HELP)
    reset.add_argument("--group", required=True, metavar="GROUP",
                       help="the consumer group (groupid)")
    reset.add_argument("--topic", dest="reset_topic", required=True, metavar="TOPIC",
                       help="the topic whose offsets to set (every partition of it)")
    reset.add_argument("--to", required=True, metavar="earliest|latest|FILE",
                       help="earliest / latest (the brokers' current offsets, like "
                            "autooffset.reset=smallest / largest) or an offsets FILE")
    reset.add_argument("--dry-run", action="store_true", help="show the changes, write nothing")
    reset.add_argument("--force", action="store_true",
                       help="write even if the group has live members")
    for p in (exp, imp, reset):
        add_zk_security_arguments(p)


def _query(args: argparse.Namespace) -> int:
    if not args.broker or not args.topic:
        raise ConfigurationError("give --broker HOST:PORT and --topic T (or a sub-command: "
                                 "export, import, reset)")
    host, port = parse_broker_address(args.broker)
    for offset in query_offsets(host, port, args.topic, args.partition, args.time, args.max):
        print(offset)
    return 0


def _read_file(path: str, flag: str = "") -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        if flag == "--to":
            raise ConfigurationError(f"--to {path!r}: expected earliest, latest or an offsets "
                                     "file, and there is no such file") from exc
        raise ConfigurationError(f"cannot read {path}: {exc.strerror}") from exc
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from exc


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
    with ZkSession(args.zk, security=zk_security_from(args)) as session:
        if command == "export":
            missing = [g for g in args.group or () if not session.exists(group_path(g))]
            if missing:
                raise ConfigurationError(
                    f"no consumer group {', '.join(map(repr, missing))} in ZooKeeper at "
                    f"{args.zk} (`zkconsumer group list` shows the groups)")
            skipped: list[ZnodeDataError] = []
            offsets = export_groups(session, args.group, skipped=skipped)
            text = format_json(offsets) if args.format == "json" else format_scala(offsets)
            if args.output:
                Path(args.output).write_text(text, encoding="utf-8")
                count = sum(len(p) for g in offsets.values() for p in g.values())
                print(f"exported {count} offsets of {len(offsets)} group(s) to {args.output}",
                      file=sys.stderr)
            else:
                sys.stdout.write(text)
            if skipped:
                # the readable offsets are exported; the exit status says the file is
                # incomplete (an import of it would leave those partitions as they are)
                sys.stdout.flush()
                print(f"zkconsumer offsets: error: {len(skipped)} partition(s) not exported, "
                      "their committed offset is unreadable: "
                      + "; ".join(f"{e.path} = {e.data!r}" for e in skipped), file=sys.stderr)
                return 1
            return 0
        notes: list[str] = []
        if command == "import":
            parsed = parse_offsets_text(_read_file(args.file), args.file)
            changes = plan_import(session, parsed, force=args.force)
            notes.extend(import_warnings(session, changes))
            # the rule reset --to FILE applies: offsets inside a message are refused
            problems, unchecked = check_boundaries(session, changes)
            notes.extend(unchecked)
            if problems:
                for note in notes:
                    print(f"warning: {note}", file=sys.stderr)
                raise ConfigurationError(
                    "offsets rejected, nothing written:\n  " + "\n  ".join(problems))
        else:
            to: str | dict[str, dict[str, dict[str, int]]] = args.to
            if args.to not in ("earliest", "latest"):
                to = parse_offsets_text(_read_file(args.to, "--to"), args.to)
            changes = plan_reset(session, args.group, args.reset_topic, to, force=args.force,
                                 notes=notes)
        for note in notes:
            print(f"warning: {note}", file=sys.stderr)
        written = None if args.dry_run else apply_changes(session, changes)
        _report(changes, written)
        return 0
