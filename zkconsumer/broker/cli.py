"""``zkconsumer broker``: run the Kafka 0.7.2-compatible dev broker in the foreground.

Settings come from an optional 0.7 ``server.properties`` (``--config``), then ``--property
KEY=VALUE`` pairs, then the dedicated flags (the last one wins).  Without ``--zk`` (and without
``zk.connect`` in the file) the broker runs standalone, with no ZooKeeper registration.

Once serving, one line goes to stdout, so scripts (and `DevBrokerProcess`) can learn the port
when ``--port 0`` was given::

    broker 1 listening on 127.0.0.1:40123

SIGTERM and SIGINT stop it cleanly: stop accepting, flush the logs, close the ZooKeeper session
(the ephemeral registrations vanish at once), exit 0.
"""

from __future__ import annotations

import argparse
import ctypes
import signal
import sys
import threading
from typing import Any

from zkconsumer.broker.config import BrokerConfig
from zkconsumer.broker.server import Broker
from zkconsumer.properties import load_properties, parse_settings
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from

HELP = "run a Kafka 0.7.2-compatible dev broker (0.7 wire protocol, segment files, ZooKeeper)"

# flag dest -> BrokerConfig field
_FLAGS = {
    "broker_id": "broker_id", "port": "port", "log_dir": "log_dir", "zk": "zk_connect",
    "num_partitions": "num_partitions", "topic_partitions": "topic_partitions",
    "log_file_size": "log_file_size", "flush_interval": "flush_interval",
    "max_message_size": "max_message_size", "max_request_size": "max_request_size",
    "host": "host", "bind": "bind", "zk_session_timeout_ms": "zk_session_timeout_ms",
    "registration_wait_ms": "registration_wait_ms",
}


EPILOG = """\
Settings, later wins: --config server.properties, then --set KEY=VALUE, then the flags.  Once
serving it prints "broker N listening on HOST:PORT" on stdout; SIGTERM / Ctrl-C stop it
cleanly (flush, deregister).  Full reference: docs/dev-broker.md.

examples:
  zkconsumer broker --broker-id 0 --port 0 --log-dir /tmp/kafka-logs --host 127.0.0.1
  zkconsumer broker --broker-id 1 --port 9092 --log-dir /var/kafka --zk zk1:2181/kafka \\
      --num-partitions 4 --topic-partitions clicks:8,views:2
  zkconsumer broker --config server.properties --port 9093 --set log.retention.hours=24

exit status: 0 stopped by a signal, 1 error (bad setting, port in use, broker id already
registered, ZooKeeper unreachable), 2 usage
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--broker-id", type=int, metavar="N", help="brokerid (required)")
    parser.add_argument("--port", type=int, metavar="P",
                        help="port (default 6667; 0 = any free port, printed at startup)")
    parser.add_argument("--log-dir", metavar="DIR", help="log.dir (required)")
    parser.add_argument("--zk", metavar="HOST:PORT[,...][/chroot]",
                        help="ZooKeeper connect string, chroot included (zk.connect); omit to "
                             "run standalone (no registration)")
    parser.add_argument("--num-partitions", type=int, metavar="K",
                        help="num.partitions: partitions per topic on this broker (default 1)")
    parser.add_argument("--topic-partitions", metavar="T1:N,T2:M",
                        help="topic.partition.count.map, e.g. t1:8,t2:4")
    parser.add_argument("--log-file-size", type=int, metavar="BYTES",
                        help="log.file.size: segment roll size (default 1073741824)")
    parser.add_argument("--flush-interval", type=int, metavar="N",
                        help="log.flush.interval: flush after N messages (default 500)")
    parser.add_argument("--flush-ms", type=int, metavar="MS",
                        help="log.default.flush.interval.ms and the flusher period "
                             "(default 3000)")
    parser.add_argument("--fsync", action="store_true", default=None,
                        help="fsync segment files on every flush (default: off)")
    parser.add_argument("--max-message-size", type=int, metavar="BYTES",
                        help="max.message.size: larger shallow payloads are dropped "
                             "(default 1000000)")
    parser.add_argument("--max-request-size", type=int, metavar="BYTES",
                        help="max.socket.request.bytes (default 104857600)")
    parser.add_argument("--host", metavar="H",
                        help="hostname advertised in /brokers/ids/N (default: the --bind "
                             "address; this machine's IP with --bind 0.0.0.0)")
    parser.add_argument("--bind", metavar="ADDR",
                        help="address to listen on (default: 127.0.0.1, loopback only; "
                             "0.0.0.0 = all interfaces, e.g. in a container)")
    parser.add_argument("--zk-session-timeout-ms", type=int, metavar="MS",
                        help="zk.sessiontimeout.ms (default 6000)")
    parser.add_argument("--registration-wait-ms", type=int, metavar="MS",
                        help="retry this long if /brokers/ids/N is still held (e.g. by a "
                             "killed predecessor) instead of refusing at once (default 0)")
    parser.add_argument("--set", "--property", dest="property", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="any 0.7 server.properties key (repeatable; --property is the "
                             "old name)")
    parser.add_argument("--config", metavar="server.properties",
                        help="a Kafka 0.7 server.properties file (flags override it)")
    add_zk_security_arguments(parser)


def build_config(args: argparse.Namespace) -> BrokerConfig:
    """The BrokerConfig for parsed arguments: file, then --property, then flags."""
    props: dict[str, str] = {}
    if args.config:
        props.update(load_properties(args.config))
    props.update(parse_settings(args.property))
    overrides: dict[str, Any] = {}
    for dest, name in _FLAGS.items():
        value = getattr(args, dest, None)
        if value is not None:
            overrides[name] = value
    if args.flush_ms is not None:
        overrides["flush_interval_ms"] = args.flush_ms
        overrides["flush_scheduler_interval_ms"] = args.flush_ms
    if args.fsync:
        overrides["fsync"] = True
    overrides["zk_security"] = zk_security_from(args, props)
    return BrokerConfig.from_properties(props, **overrides)


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def hold_freed_memory() -> bool:
    """Have glibc keep freed memory of this process for reuse (True if it took the setting).

    Why: the broker allocates each produce request's body and message set afresh -- up to
    ``max.socket.request.bytes`` each -- and by default glibc maps a chunk of over 128 KiB
    (more once it has seen bigger ones) straight from the kernel and hands it back on free, or
    trims its heap when the top is free past twice that; either way the next request faults
    its megabytes in again page by page.  With 5,000 messages of 1 KiB per request that was
    2.5-4.4 us of broker CPU per message, and 0.9-1.0 with the heap kept (measured ad hoc;
    `bench broker --batch 5000` in docs/performance.md, "Large produce requests").  The reference broker reads a request into one ByteBuffer; this
    is the dev broker's way of not making its allocator the bottleneck a client is measured
    against.  The cost: up to 256 MiB of freed memory stays with the process; a request over
    32 MiB is still mapped and returned on its own.  Other C libraries: nothing happens."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    # both, or neither: setting one turns off glibc's adjusting of the other
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 256 << 20))


def main(args: argparse.Namespace) -> int:
    config = build_config(args)
    hold_freed_memory()
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        broker = Broker(config).start()
        try:
            print(f"broker {broker.broker_id} listening on {broker.host}:{broker.port}",
                  flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            broker.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print(f"broker {config.broker_id} stopped", file=sys.stderr, flush=True)
    return 0
