"""``zkconsumer run``: a consumer-group member that hands every message to your code.

This is CLI code, so it alone sets up logging (``--log-level``, ``--log-format text|json``)
and signal handling: SIGTERM/SIGINT stop gracefully (a second one exits at once -- nothing
unacknowledged is ever committed, so that is safe, only more is replayed); SIGHUP reopens
output files.  Everything else lives in `zkconsumer.daemon.runner`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from types import FrameType
from typing import Any

from zkconsumer.consumer.joining import STARTUP_TIMEOUT_HELP
from zkconsumer.daemon.config import build_config
from zkconsumer.daemon.formats import FORMATS, VALUE_ENCODINGS
from zkconsumer.daemon.runner import Daemon
from zkconsumer.zk.security_config import add_zk_security_arguments

HELP = "run a consumer-group member that feeds a file, a command or a Python handler"

_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  zkconsumer run --zk zk1:2181 --group g --topic events --output events.jsonl "
        "--format jsonl\n"
        "  zkconsumer run --config consumer.properties --topic events:2 --exec ./process.sh\n"
        "  zkconsumer run --zk zk1:2181 --group g --whitelist 'logs-.*' "
        "--handler mymod:handle --dead-letter dead.jsonl\n"
        "exec protocol, handler API, honoured 0.7 properties: docs/operations.md\n\n"
        "exit status: 0 stopped cleanly by SIGTERM / SIGINT, 1 error (bad setting, ZooKeeper\n"
        "unreachable past --startup-timeout, a sink that cannot start, an exec command that\n"
        "cannot run or keeps failing at once, a --zk chroot that does not exist), 2 usage\n"
        "(also a --topic name 0.7 cannot carry: '..', 'a/b', non-ASCII, over 255\n"
        "characters), 128+N a second signal N (exit at once, ending an exec command's\n"
        "processes too).  A --topic no broker has registered yet is waited for, with\n"
        "a warning, the zkconsumer_unregistered_topics gauge and a /healthz note")
    g = parser.add_argument_group("group and subscription")
    g.add_argument("--zk", metavar="HOST:PORT[,...][/chroot]",
                   help="ZooKeeper connect string of the 0.7 cluster, chroot included "
                        "(zk.connect; default: zk.connect of --config)")
    g.add_argument("--group", metavar="GROUP",
                   help="consumer group (groupid; default: groupid of --config)")
    g.add_argument("--topic", action="append", metavar="T[:STREAMS]",
                   help="topic to consume, optionally with its number of streams "
                        "(repeatable; a legal 0.7 name: ASCII, no '/', at most 255 "
                        "characters)")
    g.add_argument("--whitelist", metavar="REGEX", help="consume every topic matching REGEX")
    g.add_argument("--blacklist", metavar="REGEX", help="consume every topic NOT matching REGEX")
    g.add_argument("--streams", type=int, metavar="N",
                   help="streams (thread ids) per topic when not given per topic (default 1)")
    g.add_argument("--config", metavar="FILE",
                   help="Kafka 0.7 consumer.properties (unknown keys: warning)")
    g.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a 0.7 consumer property (repeatable; unknown keys: error)")

    s = parser.add_argument_group("sink (exactly one)")
    sink = s.add_mutually_exclusive_group(required=True)
    sink.add_argument("--output", metavar="FILE|-", help="append messages to FILE (- = stdout)")
    sink.add_argument("--exec", metavar="CMD",
                      help="pipe messages to a long-running command that acknowledges them")
    sink.add_argument("--handler", metavar="MODULE:FUNCTION",
                      help="call a Python function with batches (list[Message])")
    s.add_argument("--format", choices=FORMATS,
                   help="output/stdin format: raw|lines|jsonl (--output), lines|jsonl|binary "
                        "(--exec); default lines")
    s.add_argument("--value-encoding", choices=VALUE_ENCODINGS, default="utf-8",
                   help="how jsonl carries values (default utf-8; non-UTF-8 values then go "
                        "in value_base64)")
    s.add_argument("--batch-size", type=int, default=1000, metavar="N",
                   help="most messages polled at once / per handler call (default 1000)")
    s.add_argument("--max-in-flight", type=int, default=10000, metavar="N",
                   help="most unacknowledged messages given to the sink (default 10000)")
    s.add_argument("--max-retries", type=int, default=5, metavar="N",
                   help="handler retries of a failing batch before the dead letter "
                        "(default 5; without a dead letter it retries forever)")
    s.add_argument("--retry-backoff", type=float, default=0.5, metavar="S",
                   help="first handler retry delay, doubling (default 0.5)")
    s.add_argument("--retry-backoff-max", type=float, default=30.0, metavar="S",
                   help="longest handler retry delay (default 30)")
    s.add_argument("--dead-letter", metavar="FILE",
                   help="handler: write batches that exhausted their retries here (jsonl)")
    s.add_argument("--dead-letter-topic", metavar="T",
                   help="handler: publish batches that exhausted their retries to topic T")
    s.add_argument("--restart-backoff", type=float, default=0.5, metavar="S",
                   help="exec: first delay before restarting a dead child, doubling "
                        "(default 0.5)")
    s.add_argument("--restart-backoff-max", type=float, default=30.0, metavar="S",
                   help="exec: longest restart delay (default 30)")
    s.add_argument("--exec-max-restarts", type=int, default=10, metavar="N",
                   help="exec: give up (exit 1) when the child exited within 1 s without "
                        "acknowledging anything N+1 times in a row (default 10; 0 = never)")

    o = parser.add_argument_group("operations")
    o.add_argument("--shutdown-timeout", type=float, default=10.0, metavar="S",
                   help="on SIGTERM, the bound of the whole stop, signal to exit: in-flight "
                        "messages, closing the sink (an exec command's processes get SIGTERM, "
                        "then SIGKILL), the final commit, leaving the group (default 10)")
    o.add_argument("--startup-timeout", type=float, metavar="S",
                   help=STARTUP_TIMEOUT_HELP)
    o.add_argument("--revoke-timeout", type=float, default=5.0, metavar="S",
                   help="on rebalance, how long to wait for in-flight messages (default 5)")
    o.add_argument("--metrics-port", type=int, metavar="P",
                   help="serve Prometheus /metrics and /healthz on this port (0 = any)")
    o.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDR",
                   help="address for --metrics-port (default 127.0.0.1)")
    o.add_argument("--health-idle-timeout", type=float, default=60.0, metavar="S",
                   help="/healthz fails after owning no partition this long, unless the member "
                        "is a standby (more threads than partitions; default 60)")
    o.add_argument("--progress", action="store_true",
                   help="show a live msg/s, MB/s, lag line on stderr (terminals only)")
    o.add_argument("--log-level", dest="run_log_level",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level (default INFO)")
    o.add_argument("--log-format", choices=["text", "json"], default="text",
                   help="text lines or one JSON object per line (default text)")
    add_zk_security_arguments(parser)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message, and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname, "logger": record.name, "message": record.getMessage(),
        }
        out.update(_extras(record))
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``ts LEVEL logger: message  [key=value ...]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extras = _extras(record)
        if extras:
            first, nl, rest = text.partition("\n")
            fields = " ".join(f"{k}={json.dumps(v, default=str, separators=(',', ':'))}"
                              if not isinstance(v, str) else f"{k}={v}"
                              for k, v in extras.items())
            text = f"{first}  [{fields}]{nl}{rest}"
        return text


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items()
            if k not in _STANDARD_ATTRS and not k.startswith("_")}


def setup_logging(level: str | None, fmt: str) -> None:
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    if level:
        root.setLevel(getattr(logging, level))
        logging.getLogger("kazoo").setLevel(max(logging.WARNING, getattr(logging, level)))
    formatter: logging.Formatter = JsonFormatter() if fmt == "json" else TextFormatter()
    for handler in root.handlers:
        handler.setFormatter(formatter)


def main(args: argparse.Namespace) -> int:
    setup_logging(args.run_log_level, args.log_format)
    config = build_config(args)
    daemon = Daemon(config)
    log = logging.getLogger("zkconsumer.daemon")

    def stop(signum: int, frame: FrameType | None) -> None:
        if daemon.stopping:
            log.warning("second %s: exiting now (unacknowledged messages will be replayed)",
                        signal.Signals(signum).name)
            daemon.sink.kill()  # an exec command must not outlive us
            os._exit(128 + signum)
        log.info("%s received: shutting down", signal.Signals(signum).name,
                 extra={"event": "signal", "signal": signal.Signals(signum).name})
        daemon.request_stop()

    def reopen(signum: int, frame: FrameType | None) -> None:
        log.info("SIGHUP received: reopening output files", extra={"event": "signal",
                                                                  "signal": "SIGHUP"})
        daemon.request_reopen()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, reopen)
    return daemon.run()
