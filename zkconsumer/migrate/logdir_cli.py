"""``zkconsumer logdir dump DIR``: inspect a 0.7 broker's log directory without a broker.

Prints a summary per partition (segments, messages, first/last offsets, bytes, torn tails,
corruption) and, with ``--messages``, every message.  ``--json`` turns every line into a JSON
object (messages first, the summary last) so scripts can compare counts during a migration.

Exit status: 0 when everything was readable (torn tails are normal after a crash and do not
count as failure), 1 when corruption was found (with ``--skip-corrupt``; without it the first
corruption stops the dump with an error naming the file and position).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import textwrap
from typing import Any, TextIO

from zkconsumer.client.logdir import PartitionLog, ReadStats, discover, iter_partition_chunks

HELP = "inspect a Kafka 0.7 broker log directory (segment files) without a broker"


DUMP_EPILOG = """\
A torn tail (a message cut short at the end of the last segment, as after a crash) is normal
and skipped, as the 0.7 broker's recovery would.

examples:
  zkconsumer logdir dump /mnt/broker3/kafka-logs
  zkconsumer logdir dump /mnt/broker3/kafka-logs --topic orders --messages --json | head
  zkconsumer logdir dump /mnt/broker3/kafka-logs --skip-corrupt

exit status: 0 everything readable, 1 corruption found (with --skip-corrupt) or an error
(without it the first corruption stops the dump, naming the file and position), 2 usage
"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="logdir_command", metavar="SUBCOMMAND", required=True)
    parser.epilog = "example:\n  zkconsumer logdir dump /mnt/broker3/kafka-logs --topic orders"
    dump = sub.add_parser("dump", help="summarise (and optionally print) the messages on disk",
                          description=textwrap.fill(
                              "Summarise, per partition, the segment files of a 0.7 broker's "
                              "log.dir (segments, messages, first / last / next offset, bytes, "
                              "torn tails, corruption) and optionally print every message "
                              "(tab-separated topic-partition, offset, next offset, value)."),
                          epilog=DUMP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dump.add_argument("dir", metavar="DIR", help="the broker's log.dir")
    dump.add_argument("--topic", action="append", help="only this topic (repeatable)")
    dump.add_argument("--partition", type=int, help="only this partition number")
    dump.add_argument("--messages", action="store_true", help="print every message too")
    dump.add_argument("--json", action="store_true", help="JSON lines instead of text")
    dump.add_argument("--skip-corrupt", action="store_true",
                      help="report corruption and continue with the next segment "
                           "(default: stop at the first corruption)")


def _value_fields(value: bytes) -> dict[str, Any]:
    try:
        return {"value": value.decode("utf-8")}
    except UnicodeDecodeError:
        return {"value_base64": base64.b64encode(value).decode("ascii")}


def _partition_summary(plog: PartitionLog, stats: ReadStats) -> dict[str, Any]:
    return {
        "topic": plog.topic,
        "partition": plog.partition,
        "segments": len(plog.segments),
        "messages": stats.messages,
        "first_offset": stats.first_offset,
        "last_offset": stats.last_offset,
        "next_offset": stats.next_offset if stats.next_offset is not None else plog.start,
        "start": plog.start,
        "end": plog.end,
        "bytes": stats.bytes,
        "torn_tails": [i.offset for i in stats.issues if i.kind == "torn-tail"],
        "corrupt": [{"path": i.path, "position": i.position, "offset": i.offset,
                     "detail": i.detail} for i in stats.issues if i.kind == "corrupt"],
        "gaps": [list(g) for g in plog.gaps()],
    }


def dump(log_dir: str, *, topics: list[str] | None = None, partition: int | None = None,
         messages: bool = False, as_json: bool = False, skip_corrupt: bool = False,
         out: TextIO | None = None) -> list[dict[str, Any]]:
    """Read every selected partition; print messages (if asked) and the summary."""
    out = out if out is not None else sys.stdout
    summaries = []
    for plog in discover(log_dir, topics=topics, partition=partition):
        stats = ReadStats()
        for chunk in iter_partition_chunks(plog, stats=stats,
                                           on_corrupt="skip" if skip_corrupt else "raise"):
            if not messages:
                continue
            for offset, next_offset, value in chunk:
                if as_json:
                    record = {"type": "message", "topic": plog.topic,
                              "partition": plog.partition, "offset": offset,
                              "next_offset": next_offset, **_value_fields(value)}
                    out.write(json.dumps(record) + "\n")
                else:
                    text = value.decode("utf-8", errors="backslashreplace")
                    out.write(f"{plog.topic}-{plog.partition}\t{offset}\t{next_offset}\t{text}\n")
        summaries.append(_partition_summary(plog, stats))
    _print_summary(summaries, as_json, out)
    return summaries


def _print_summary(summaries: list[dict[str, Any]], as_json: bool, out: TextIO) -> None:
    totals = {
        "topics": len({s["topic"] for s in summaries}),
        "partitions": len(summaries),
        "segments": sum(s["segments"] for s in summaries),
        "messages": sum(s["messages"] for s in summaries),
        "bytes": sum(s["bytes"] for s in summaries),
        "torn_tails": sum(len(s["torn_tails"]) for s in summaries),
        "corrupt": sum(len(s["corrupt"]) for s in summaries),
    }
    if as_json:
        out.write(json.dumps({"type": "summary", "partitions": summaries, "totals": totals})
                  + "\n")
        return
    header = ("topic", "part", "segs", "messages", "first", "last", "next", "bytes", "notes")
    rows = [header]
    for s in summaries:
        notes = []
        if s["torn_tails"]:
            notes.append(f"torn tail at {s['torn_tails'][0]}")
        notes += [f"CORRUPT {c['path']} @{c['position']}" for c in s["corrupt"]]
        notes += [f"gap {a}->{b}" for a, b in s["gaps"]]
        rows.append((s["topic"], str(s["partition"]), str(s["segments"]), str(s["messages"]),
                     "-" if s["first_offset"] is None else str(s["first_offset"]),
                     "-" if s["last_offset"] is None else str(s["last_offset"]),
                     str(s["next_offset"]), str(s["bytes"]), "; ".join(notes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
                  + ("  " + r[-1] if r[-1] else "") + "\n")
    out.write(f"total: {totals['topics']} topics, {totals['partitions']} partitions, "
              f"{totals['segments']} segments, {totals['messages']} messages, "
              f"{totals['bytes']} bytes, {totals['torn_tails']} torn tails, "
              f"{totals['corrupt']} corrupt segments\n")


def main(args: argparse.Namespace) -> int:
    summaries = dump(args.dir, topics=args.topic, partition=args.partition,
                     messages=args.messages, as_json=args.json,
                     skip_corrupt=args.skip_corrupt)
    return 1 if any(s["corrupt"] for s in summaries) else 0
