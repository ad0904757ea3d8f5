"""``zkconsumer fetch``: print the messages of one partition of one broker, with their offsets.

The successor of 0.7's SimpleConsumerShell: no ZooKeeper, no group, no commit; it reads from a
byte offset (or ``earliest``/``latest``) and prints one line per message to stdout:

* ``text``  -- ``OFFSET<TAB>VALUE`` with the value decoded as UTF-8 (invalid bytes replaced,
  newlines and tabs escaped so one message stays one line);
* ``hex``   -- ``OFFSET<TAB>HEX``;
* ``jsonl`` -- ``{"offset": .., "next_offset": .., "size": .., "value": ..}`` where ``value`` is
  the UTF-8 text, or ``value_base64`` when the payload is not valid UTF-8.

At the end a summary goes to stderr with the offset to resume from.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Callable

from zkconsumer.client.connection import parse_broker_address
from zkconsumer.client.simple import FetchedMessage, SimpleConsumer

HELP = "print messages of one partition of one broker (like SimpleConsumerShell)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--broker", required=True, metavar="HOST:PORT", help="the broker")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partition", type=int, default=0, help="broker-local partition")
    parser.add_argument("--offset", default="earliest",
                        help="byte offset to start at, or earliest / latest (default earliest)")
    parser.add_argument("--max-messages", type=int, default=None, metavar="N",
                        help="stop after N messages")
    parser.add_argument("--fetch-size", type=int, default=1048576, metavar="BYTES",
                        help="bytes per fetch request (default 1048576)")
    parser.add_argument("--max-fetch-size", type=int, default=None, metavar="BYTES",
                        help="largest fetch size when one message is bigger (default "
                             "max(16 MiB, fetch size))")
    parser.add_argument("--format", choices=["text", "hex", "jsonl"], default="text")
    parser.add_argument("--follow", action="store_true",
                        help="keep polling at the end of the log instead of stopping")
    parser.add_argument("--socket-timeout", type=float, default=30.0, metavar="SECONDS")


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
    with SimpleConsumer(host, port, socket_timeout=args.socket_timeout,
                        fetch_size=args.fetch_size, max_fetch_size=max_fetch) as consumer:
        if args.offset == "earliest":
            offset = consumer.earliest_offset(args.topic, args.partition)
        elif args.offset == "latest":
            offset = consumer.latest_offset(args.topic, args.partition)
        else:
            try:
                offset = int(args.offset)
            except ValueError:
                print(f"zkconsumer fetch: --offset must be a number, earliest or latest, "
                      f"not {args.offset!r}", file=sys.stderr)
                return 2
        next_offset = offset
        out = sys.stdout
        if args.max_messages is None or args.max_messages > 0:
            for message in consumer.iter_messages(args.topic, args.partition, offset,
                                                  stop_at_end=not args.follow):
                out.write(fmt(message) + "\n")
                count += 1
                next_offset = message.next_offset
                if args.max_messages is not None and count >= args.max_messages:
                    break
        out.flush()
    print(f"{count} message(s) from {args.topic}/{args.partition} at {host}:{port}; "
          f"next offset {next_offset}", file=sys.stderr)
    return 0
