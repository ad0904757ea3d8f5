"""``zkconsumer produce``: send stdin to a topic (the 0.7 ConsoleProducer, done carefully).

Input (stdin):
    * text (default): one message per line, the line ending removed.  With
      ``--key-separator SEP`` each line is ``KEY SEP VALUE`` (split at the first SEP); the key
      routes the message with the Java hash; a line without SEP is sent unkeyed.
    * ``--binary``: length-prefixed records, ``int32 big-endian length + bytes`` each.

Configuration, later wins: ``--config producer.properties`` (0.7 names), then each
``--set key=value`` (0.7 names too), then the explicit flags.  Unkeyed messages are sent in
groups of ``--batch-size`` per ``send()`` (a group goes to one partition, as one 0.7
``ProducerData``), so sync mode does not pay one request per line.

At the end a summary goes to stderr: messages, bytes, failures; the exit status is 1 if any
message failed (each failure is also logged), 0 otherwise.
"""

from __future__ import annotations

import argparse
import logging
import struct
import sys
import time
from collections.abc import Iterator
from typing import BinaryIO

from zkconsumer.errors import (
    ConfigurationError,
    DeliveryError,
    MessageTooLargeError,
    ProducerError,
)
from zkconsumer.producer.config import ProducerConfig
from zkconsumer.producer.producer import Producer
from zkconsumer.producer.topics import create_on_every_broker
from zkconsumer.properties import load_properties, parse_settings
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from

HELP = "send lines (or length-prefixed records) from stdin to a topic"

log = logging.getLogger(__name__)

_LEN = struct.Struct(">i")


EPILOG = """\
Settings, later wins: --config file, then --set, then the flags.  Give the cluster with --zk
(the producer picks the partition: by key with the Java hash, else random) or --broker-list.
A summary goes to stderr at the end.

examples:
  echo hello | zkconsumer produce --zk zk1:2181/kafka --topic events
  zkconsumer produce --zk zk1:2181/kafka --topic events --key-separator $'\\t' < keyed.tsv
  zkconsumer produce --zk zk1:2181/kafka --topic new-topic --create-topic --key-separator , < f
  zkconsumer produce --broker-list 0:kafka1:9092 --topic events --compression gzip --confirm < f
  zkconsumer produce --config producer.properties --topic events --async --set queue.time=100 < f

exit status: 0 every message sent, 1 a message failed or an error, 2 usage
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--zk", metavar="HOST:PORT[,...][/chroot]",
                       help="ZooKeeper connect string of the 0.7 cluster, chroot included "
                            "(zk.connect)")
    where.add_argument("--broker-list", metavar="ID:HOST:PORT,...",
                       help="static brokers instead of ZooKeeper (broker.list); the broker "
                            "picks the partition")
    parser.add_argument("--topic", required=True, help="the topic to send to")
    parser.add_argument("--key-separator", metavar="SEP",
                        help="text input: split each line into KEY SEP VALUE")
    parser.add_argument("--create-topic", action="store_true",
                        help="first create the topic on every live broker that lacks it "
                             "(an empty produce to its partition 0), so keyed messages spread "
                             "over all brokers: 0.7 keeps a topic on the brokers that got it "
                             "first; needs --zk")
    parser.add_argument("--compression", choices=["none", "gzip", "snappy"],
                        help="compression.codec (default none)")
    parser.add_argument("--confirm", action="store_true",
                        help="confirm every produce with a following offsets request (one "
                             "round trip each; detects rejections; property confirm=true)")
    parser.add_argument("--binary", action="store_true",
                        help="stdin holds int32-BE-length-prefixed records, not lines")
    parser.add_argument("--async", dest="use_async", action="store_true",
                        help="producer.type=async (background batching)")
    parser.add_argument("--batch-size", type=int, metavar="N",
                        help="batch.size, and messages per send() for unkeyed input "
                             "(default 200)")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="KEY=VALUE", help="a producer property (0.7 name); repeatable")
    parser.add_argument("--config", metavar="FILE", help="a producer.properties file")
    add_zk_security_arguments(parser)


def build_config(args: argparse.Namespace) -> ProducerConfig:
    props: dict[str, str] = {}
    if args.config:
        props.update(load_properties(args.config))
    props.update(parse_settings(args.settings))
    if args.zk:
        props.pop("broker.list", None)
        props["zk.connect"] = args.zk
    if args.broker_list:
        props.pop("zk.connect", None)
        props["broker.list"] = args.broker_list
    if args.compression:
        props["compression.codec"] = args.compression
    if args.confirm:
        props["confirm"] = "true"
    if args.use_async:
        props["producer.type"] = "async"
    if args.batch_size is not None:
        props["batch.size"] = str(args.batch_size)
    if not props.get("zk.connect") and not props.get("broker.list"):
        raise ConfigurationError("give --zk HOST:PORT[/chroot] or --broker-list ID:HOST:PORT,... "
                                 "(or zk.connect / broker.list in --config)")
    return ProducerConfig.from_properties(props, zk_security=zk_security_from(args, props))


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


def read_records(stream: BinaryIO) -> Iterator[bytes]:
    while True:
        head = stream.read(4)
        if not head:
            return
        if len(head) < 4:
            raise ProducerError(f"truncated record length at end of input ({len(head)} bytes)")
        (n,) = _LEN.unpack(head)
        if n < 0:
            raise ProducerError(f"negative record length {n} in input")
        body = stream.read(n)
        if len(body) < n:
            raise ProducerError(f"truncated record: expected {n} bytes, got {len(body)}")
        yield body


def main(args: argparse.Namespace) -> int:
    if args.binary and args.key_separator:
        raise ConfigurationError("--key-separator applies to text input, not --binary")
    config = build_config(args)
    group = max(1, args.batch_size or config.batch_size)
    sep = args.key_separator.encode() if args.key_separator else None
    stream: BinaryIO = sys.stdin.buffer
    records = read_records(stream) if args.binary else read_lines(stream)
    refused = 0
    started = time.monotonic()
    producer = Producer(config)
    try:
        if args.create_topic:
            create_on_every_broker(producer, args.topic)
        pending: list[bytes] = []

        def send(messages: list[bytes], key: bytes | None = None) -> None:
            nonlocal refused
            try:
                producer.send(args.topic, messages, key=key)
            except DeliveryError as exc:  # already counted in stats.failed
                log.error("%s", exc)
            except MessageTooLargeError as exc:  # refused before sending: count it here
                refused += len(messages)
                log.error("%s", exc)

        for record in records:
            if sep is not None and sep in record:
                if pending:
                    send(pending)
                    pending = []
                key, _, value = record.partition(sep)
                send([value], key)
                continue
            pending.append(record)
            if len(pending) >= group:
                send(pending)
                pending = []
        if pending:
            send(pending)
        try:
            producer.flush()
        except DeliveryError as exc:
            log.error("%s", exc)
    finally:
        producer.close()
    stats = producer.stats
    failed = stats.failed + refused
    elapsed = time.monotonic() - started
    print(f"produced {stats.messages_sent} message(s), {stats.bytes_sent} bytes to "
          f"{args.topic!r} in {elapsed:.2f}s; {failed} failed, {stats.retried} retried",
          file=sys.stderr)
    return 1 if failed else 0
