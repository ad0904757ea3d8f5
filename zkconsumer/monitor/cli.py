"""``zkconsumer monitor``: Burrow-style evaluation of every group, a web page, JSON, Prometheus.

Polls ZooKeeper (and the brokers' log ends) every ``--interval`` seconds, evaluates each
group over a window of samples (`zkconsumer.monitor.evaluator`) and serves the result on
``--host``/``--port``; ``--once`` polls once, prints, and exits with a Nagios-style status.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import threading
from typing import Any

from zkconsumer.errors import ConfigurationError, UsageError, ZkConsumerError
from zkconsumer.monitor.evaluator import EvalConfig
from zkconsumer.monitor.model import GroupEval, Status, exit_status
from zkconsumer.monitor.notifier import Notifier, redact_url
from zkconsumer.monitor.sampler import Sampler
from zkconsumer.monitor.server import MonitorServer
from zkconsumer.monitor.service import Monitor
from zkconsumer.monitor.store import WindowStore
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from
from zkconsumer.zk.session import ZkSession

HELP = "watch every consumer group: lag evaluation (OK/WARN/STALL/STOP/REWIND/ERR), web page, " \
       "JSON API, Prometheus metrics, webhooks"

DEFAULT_PORT = 8470

EPILOG = f"""\
statuses (docs/operations.md, "Monitor", has an example of each):
  OK      caught up, or consuming without lag growing over the whole window
  WARN    lag grew over the whole window while the offset moved (slower than the producer)
  REWIND  the committed offset moved backwards and has not caught up with where it was
  STALL   lag > 0, a live member owns the partition, the offset has not moved for a window
  STOP    lag > 0, no live member owns the partition, no commit for longer than the window
  ERR     partitions unowned while members exist, owners the range assignment does not name,
          an unreadable offset znode or registration, a broker that does not answer
  NOTFOUND  a subscribed topic no broker has registered ("topic not registered")
The window is --window samples --interval seconds apart (default 10 x 30 s = 5 minutes).

examples:
  zkconsumer monitor --zk zk1:2181/kafka                  # page on http://127.0.0.1:{DEFAULT_PORT}/
  zkconsumer monitor --zk zk1:2181/kafka --groups '^billing' --port 9000 --store mon.db
  zkconsumer monitor --zk zk1:2181/kafka --notify-url https://hooks.example/zk07
  zkconsumer monitor --zk zk1:2181/kafka --mirror mm=http://mirror1:9310/metrics
  zkconsumer monitor --zk zk1:2181/kafka --once           # for cron / Nagios
  zkconsumer monitor --zk zk1:2181/kafka --once --json | jq '.[] | {{group, status}}'

exit status: while serving 0 after SIGTERM/SIGINT, 1 error; with --once 0 every group OK,
1 a warning (WARN, REWIND, NOTFOUND), 2 ERR/STALL/STOP, 3 the poll itself failed
(ZooKeeper unreachable: the state is unknown)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--zk", required=True, metavar="HOST:PORT[,...][/chroot]",
                        help="ZooKeeper connect string of the 0.7 cluster, chroot included "
                             "(zk.connect)")
    parser.add_argument("--groups", metavar="REGEX",
                        help="only groups whose name matches REGEX (re.search; default: all)")
    parser.add_argument("--interval", type=float, default=30.0, metavar="S",
                        help="seconds between polls (default: 30)")
    parser.add_argument("--window", type=int, default=10, metavar="N",
                        help="samples per evaluation window, like Burrow's intervals "
                             "(default: 10)")
    parser.add_argument("--history", type=int, default=240, metavar="N",
                        help="samples kept per partition for the charts (default: 240, two "
                             "hours at 30 s)")
    parser.add_argument("--allowed-lag", type=int, default=0, metavar="BYTES",
                        help="lag that still counts as caught up (default: 0)")
    parser.add_argument("--err-polls", type=int, default=2, metavar="N",
                        help="consecutive polls an ownership problem must last before ERR "
                             "(a rebalance takes a moment; default: 2; --once uses 1)")
    parser.add_argument("--host", default="127.0.0.1", metavar="ADDR",
                        help="address of the web page, API and /metrics (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, metavar="P",
                        help=f"port of the web page, API and /metrics (default: {DEFAULT_PORT}; "
                             "0 = any free port, printed at start)")
    parser.add_argument("--store", metavar="FILE",
                        help="keep the samples in this SQLite file too, so a restart keeps "
                             "the history (default: memory only)")
    parser.add_argument("--notify-url", metavar="URL",
                        help="POST a JSON object to URL on every status change of a group "
                             "(retried with backoff; never delays polling)")
    parser.add_argument("--mirror", action="append", default=[], metavar="GROUP=URL",
                        help="the /metrics URL of the `zkconsumer mirror` process consuming as "
                             "GROUP: its target side (messages acknowledged, in flight, "
                             "end-to-end lag) is shown beside the group (repeatable)")
    parser.add_argument("--once", action="store_true",
                        help="poll once, print the evaluation and exit 0/1/2 (see below)")
    parser.add_argument("--json", action="store_true", help="with --once: print JSON")
    parser.add_argument("--socket-timeout", type=float, default=5.0, metavar="S",
                        help="timeout of a broker offsets request (default: 5)")
    add_zk_security_arguments(parser)


def _config(args: argparse.Namespace) -> EvalConfig:
    if args.history < args.window + 1:
        raise UsageError(f"--history ({args.history}) must be > --window "
                                 f"({args.window})")
    if args.groups is not None:
        try:
            re.compile(args.groups)
        except re.error as exc:
            raise UsageError(f"--groups {args.groups!r} is not a regex: {exc}") from None
    for spec in args.mirror:
        group, sep, url = spec.partition("=")
        if not sep or not group or not url.startswith(("http://", "https://")):
            raise UsageError(f"--mirror {spec!r}: expected GROUP=http://HOST:PORT/metrics")
    if args.json and not args.once:
        raise UsageError("--json goes with --once (the server has /v1/groups)")
    try:
        return EvalConfig(window=args.window, interval=args.interval,
                          allowed_lag=args.allowed_lag,
                          err_cycles=1 if args.once else args.err_polls)
    except ConfigurationError as exc:  # a flag's value: a usage error (exit 2)
        raise UsageError(str(exc)) from None


def main(args: argparse.Namespace) -> int:
    cfg = _config(args)
    if args.once:
        return _once(args, cfg)
    store = WindowStore(args.history, args.store)
    notifier = Notifier(args.notify_url) if args.notify_url else None
    with ZkSession(args.zk, security=zk_security_from(args)) as session:
        sampler = Sampler(session, groups=args.groups, socket_timeout=args.socket_timeout)
        monitor = Monitor(sampler, store, cfg,
                          on_change=notifier.notify if notifier else None,
                          mirrors=_mirrors(args))
        server = MonitorServer(monitor, args.host, args.port)
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        server.start()
        print(f"zkconsumer monitor: serving {server.url} (API {server.url}v1/groups, "
              f"metrics {server.url}metrics); polling every {cfg.interval:g} s"
              + (f"; notifying {redact_url(args.notify_url)}" if args.notify_url else ""),
              file=sys.stderr, flush=True)
        monitor.start()
        try:
            stop.wait()
        finally:
            monitor.stop()
            server.close()
            sampler.close()
            store.close()
            if notifier is not None:
                notifier.close()
    return 0


def _mirrors(args: argparse.Namespace) -> dict[str, str]:
    return dict(spec.split("=", 1) for spec in args.mirror)


def _once(args: argparse.Namespace, cfg: EvalConfig) -> int:
    store = WindowStore(args.history, args.store)
    try:
        with ZkSession(args.zk, security=zk_security_from(args)) as session:
            sampler = Sampler(session, groups=args.groups, socket_timeout=args.socket_timeout)
            try:
                state = Monitor(sampler, store, cfg, mirrors=_mirrors(args)).poll_once()
            finally:
                sampler.close()
    except ZkConsumerError as exc:
        print(f"zkconsumer monitor: error: {exc}", file=sys.stderr)
        return 3
    finally:
        store.close()
    if state.polled_at is None:
        print(f"zkconsumer monitor: error: the poll failed: {state.last_error}", file=sys.stderr)
        return 3
    groups = [ev for _, ev in sorted(state.groups.items())]
    if args.json:
        print(json.dumps([ev.as_dict(history=False) for ev in groups], indent=2))
    else:
        print_table(groups)
    return exit_status([ev.status for ev in groups])


def print_table(groups: list[GroupEval], out: Any = None) -> None:
    """The human summary: one line per group, then why for every group that is not OK."""
    out = out or sys.stdout
    out.write(f"{'group':<32} {'status':<8} {'members':>7} {'partitions':>10} {'lag':>14}\n")
    for ev in groups:
        out.write(f"{ev.group:<32} {ev.status.value:<8} {len(ev.members):>7} "
                  f"{len(ev.partitions):>10} {ev.total_lag:>14}\n")
        if ev.status is not Status.OK:
            for why in ev.reasons[:10]:
                out.write(f"    {why}\n")
            if len(ev.reasons) > 10:
                out.write(f"    ... and {len(ev.reasons) - 10} more\n")
    if not groups:
        out.write("(no consumer groups in /consumers)\n")
