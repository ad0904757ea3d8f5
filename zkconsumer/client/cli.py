"""``zkconsumer fetch``: print the messages of one partition of one broker, with their offsets.

The successor of 0.7's SimpleConsumerShell: no ZooKeeper, no group, no commit; it reads from a
byte offset (or ``earliest``/``latest``) and prints one line per message to stdout:

* ``text``  -- ``OFFSET<TAB>VALUE`` with the value decoded as UTF-8 (invalid bytes replaced,
  newlines and tabs escaped so one message stays one line);
* ``hex``   -- ``OFFSET<TAB>HEX``;
* ``jsonl`` -- ``{"offset": .., "next_offset": .., "size": .., "value": ..}`` where ``value`` is
  the UTF-8 text, or ``value_base64`` when the payload is not valid UTF-8.

At the end a summary goes to stderr with the offset to resume from -- also when corrupt data
stops it: every whole message before the corrupt one is printed, then the summary (its next
offset is the corrupt message's), then the one-line error.  A start offset inside a message
is reported as misaligned, naming the message boundaries around it.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Callable

from zkconsumer.client.connection import parse_broker_address
from zkconsumer.client.simple import FetchedMessage, SimpleConsumer
from zkconsumer.errors import DecodeError

HELP = "print messages of one partition of one broker (like SimpleConsumerShell)"


EPILOG = """\
Offsets are 0.7 byte positions; a start offset must be the start of a message (earliest,
latest, or a next offset printed by an earlier run).  The summary on stderr ends with the
offset to resume from.  An unknown topic reads as empty (a 0.7 broker answers it like an
empty log).  Corrupt data: the messages before it are printed, the summary's next offset is
the corrupt message, and the error names it (exit 1).  A start offset inside a message is
reported as "misaligned" with the boundaries around it (exit 1).

examples:
  zkconsumer fetch --broker kafka1:9092 --topic orders --partition 0 --max-messages 10
  zkconsumer fetch --broker kafka1:9092 --topic orders --offset latest --follow
  zkconsumer fetch --broker kafka1:9092 --topic orders --offset 286894308 --format jsonl

exit status: 0 success, 1 error (broker unreachable, partition out of range, ...), 2 usage
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--broker", required=True, metavar="HOST:PORT", help="the broker")
    parser.add_argument("--topic", required=True, help="the topic")
    parser.add_argument("--partition", type=int, default=0,
                        help="broker-local partition number (default 0)")
    parser.add_argument("--offset", default="earliest",
                        help="byte offset to start at, or earliest / latest (default earliest)")
    parser.add_argument("--max-messages", type=int, default=None, metavar="N",
                        help="stop after N messages (default: all)")
    parser.add_argument("--fetch-size", type=int, default=1048576, metavar="BYTES",
                        help="bytes per fetch request, the consumer's fetch.size "
                             "(default 1048576)")
    parser.add_argument("--max-fetch-size", type=int, default=None, metavar="BYTES",
                        help="largest fetch size when one message is bigger (default "
                             "max(16 MiB, fetch size))")
    parser.add_argument("--format", choices=["text", "hex", "jsonl"], default="text",
                        help="text: OFFSET<TAB>VALUE (UTF-8, newlines escaped; default); hex: "
                             "OFFSET<TAB>HEX; jsonl: one JSON object per message")
    parser.add_argument("--follow", action="store_true",
                        help="keep polling at the end of the log instead of stopping")
    parser.add_argument("--socket-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="socket timeout, the consumer's socket.timeout.ms / 1000 "
                             "(default 30)")


def _text(m: FetchedMessage) -> str:
    value = m.value.decode("utf-8", "replace")
    value = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return f"{m.offset}\t{value.replace(chr(9), chr(92) + 't')}"


def _hex(m: FetchedMessage) -> str:
    return f"{m.offset}\t{m.value.hex()}"


def _jsonl(m: FetchedMessage) -> str:
    record: dict[str, object] = {"offset": m.offset, "next_offset": m.next_offset,
                                 "size": len(m.value)}
    try:
        record["value"] = m.value.decode("utf-8")
    except UnicodeDecodeError:
        record["value_base64"] = base64.b64encode(m.value).decode("ascii")
    return json.dumps(record, ensure_ascii=False)


FORMATTERS: dict[str, Callable[[FetchedMessage], str]] = {
    "text": _text, "hex": _hex, "jsonl": _jsonl,
}


def main(args: argparse.Namespace) -> int:
    host, port = parse_broker_address(args.broker)
    max_fetch = args.max_fetch_size or max(16 * 1024 * 1024, args.fetch_size)
    fmt = FORMATTERS[args.format]
    count = 0
    start = -1
    if args.offset not in ("earliest", "latest"):
        start = int(args.offset) if args.offset.lstrip("-").isdigit() else -1
        if start < 0:
            print(f"zkconsumer fetch: error: --offset must be earliest, latest or a byte "
                  f"offset >= 0, not {args.offset!r}", file=sys.stderr)
            return 2
    with SimpleConsumer(host, port, socket_timeout=args.socket_timeout,
                        fetch_size=args.fetch_size, max_fetch_size=max_fetch) as consumer:
        if args.offset == "earliest":
            offset = consumer.earliest_offset(args.topic, args.partition)
        elif args.offset == "latest":
            offset = consumer.latest_offset(args.topic, args.partition)
        else:
            offset = start
        next_offset = offset
        out = sys.stdout
        try:
            if args.max_messages is None or args.max_messages > 0:
                for message in consumer.iter_messages(args.topic, args.partition, offset,
                                                      stop_at_end=not args.follow):
                    out.write(fmt(message) + "\n")
                    count += 1
                    next_offset = message.next_offset
                    if args.max_messages is not None and count >= args.max_messages:
                        break
        except DecodeError:
            # corrupt or misaligned: what came before was printed; say how far it got, then
            # the one-line error (its offset is where the bad data starts)
            out.flush()
            _summary(args, host, port, count, next_offset)
            raise
        out.flush()
    _summary(args, host, port, count, next_offset)
    return 0


def _summary(args: argparse.Namespace, host: str, port: int, count: int,
             next_offset: int) -> None:
    print(f"{count} message(s) from {args.topic}/{args.partition} at {host}:{port}; "
          f"next offset {next_offset}", file=sys.stderr)
