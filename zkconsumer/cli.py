"""The ``zkconsumer`` command: one entry point, one sub-command per job.

Each sub-command lives in the package that owns the job (``zkconsumer.broker.cli`` for the dev
broker, ``zkconsumer.consumer.cli`` for ``group``, ...).  A command module exposes:

* ``HELP: str`` -- the one-line summary shown by ``zkconsumer --help``;
* ``configure(parser: argparse.ArgumentParser) -> None`` -- adds its flags (and nested
  sub-commands, e.g. ``offsets export``);
* ``main(args: argparse.Namespace) -> int`` -- runs it and returns the exit status.

This module is the only place that configures logging, and it turns every error -- a
`ZkConsumerError`, an `OSError` (a file that cannot be read or written), anything unexpected --
into one line ``zkconsumer COMMAND: error: ...`` and exit status 1 (2 for a `UsageError`,
a flag value the command cannot use, like argparse's own errors; a traceback only with
``--debug``), because an operator reading "broker error 1: offset out of range [topic=t,
partition=0]" needs no stack.  Exit statuses: 0 success, 1 error, 2 command-line usage error
(argparse), 130 interrupted, 141 (128 + SIGPIPE) when the reader of stdout went away.

A closed stdout (``zkconsumer logdir dump ... | head``) ends the command quietly with status
141, as coreutils do when SIGPIPE kills them (``yes | head`` under ``set -o pipefail``): the
reader got what it wanted, so an "error: Broken pipe" line would be noise, while a non-zero
status still tells a script the output was cut short.  Only a broken *stdout* counts: a
broken pipe to anything else (an exec child, a socket) stays an error.

One-shot commands (everything but the long-running ones in `_LONG_RUNNING`) keep kazoo's
connection-retry WARNINGs quiet, so an unreachable ``--zk`` gives exactly one error line (after
the bounded connection timeout) instead of a screenful of "Connection dropped".
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import select
import sys
from collections.abc import Sequence

from zkconsumer.errors import UsageError, ZkConsumerError
from zkconsumer.extras import from_import_error

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
    ("monitor", "zkconsumer.monitor.cli"),
    ("bench", "zkconsumer.bench.cli"),
)

#: Commands that run until stopped: they keep kazoo's WARNINGs (a dropped ZooKeeper connection
#: while running is worth a log line); every other command is one request and one answer.
_LONG_RUNNING = frozenset({"demo", "dev-cluster", "broker", "run", "mirror", "bench"})

EPILOG = """\
examples:
  zkconsumer dev-cluster --brokers 2 --dir /tmp/zkc --zk-port 2181 &
  echo hello | zkconsumer produce --zk 127.0.0.1:2181 --topic events
  zkconsumer run --zk 127.0.0.1:2181 --group g1 --topic events --output - --format jsonl
  zkconsumer group describe --zk 127.0.0.1:2181 --group g1
  zkconsumer COMMAND --help          (every command has its own examples)

exit status: 0 success, 1 error (one line "zkconsumer COMMAND: error: ..."; --debug for the
traceback), 2 command-line usage error, 130 interrupted (Ctrl-C), 141 stdout closed by its
reader (e.g. `| head`; quiet, like coreutils killed by SIGPIPE)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zkconsumer",
        description=(
            "Kafka 0.7 tooling for ZooKeeper-coordinated clusters: run a consumer-group member "
            "that shares a group with Scala consumers, produce, inspect groups and offsets, "
            "run a 0.7-compatible dev broker, and migrate data off 0.7."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="logging level for messages on stderr (default: INFO)")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # that command is not built yet
            raise
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.configure(cmd)
        cmd.set_defaults(_main=module.main)
        _add_debug_flag(cmd)
    return parser


def _add_debug_flag(parser: argparse.ArgumentParser) -> None:
    """``--debug`` after the command too (``zkconsumer group list --zk X --debug``), on every
    nested sub-command; SUPPRESS keeps a sub-parser from resetting the top-level value."""
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback of an error instead of one line")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _add_debug_flag(child)


def configure_logging(level: str, *, quiet_kazoo: bool = False) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    floor = logging.ERROR if quiet_kazoo and level != "DEBUG" else logging.WARNING
    logging.getLogger("kazoo").setLevel(max(floor, getattr(logging, level)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_main", None):
        parser.print_help()
        return 2
    configure_logging(args.log_level, quiet_kazoo=args.command not in _LONG_RUNNING)
    try:
        status = int(args._main(args) or 0)
        sys.stdout.flush()  # a closed stdout shows here, not at interpreter exit
        return status
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            return _quiet_sigpipe_exit()
        if args.debug:
            raise
        status = 2 if isinstance(exc, UsageError) else 1
        line = f"zkconsumer {args.command}: error: {_describe(exc)}"
        if getattr(args, "log_format", "text") == "json":
            # the command's own log handler writes JSON: keep the last line parseable too
            logging.getLogger("zkconsumer").error(line, extra={"event": "fatal_error",
                                                               "exit_status": status})
        else:
            print(line, file=sys.stderr)
        return status


#: Exit status for "the reader of stdout went away": what a shell reports for a process killed
#: by SIGPIPE (128 + 13), as ``yes | head`` gives.
SIGPIPE_STATUS = 141


def _stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reading end is gone.

    A `BrokenPipeError` may also come from an exec child or a socket; only a dead stdout
    means "the reader had enough".  poll() reports POLLERR on the write end of a pipe whose
    readers all closed it.
    """
    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (captured, closed)
        return False


def _quiet_sigpipe_exit() -> int:
    """Give up on stdout without another "Broken pipe" at interpreter exit (Python flushes
    sys.stdout then): point its descriptor at /dev/null, as the Python docs advise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return SIGPIPE_STATUS


def _describe(exc: BaseException) -> str:
    """One line for an error: our own errors say what they mean; an OSError names its file;
    a missing optional extra says what to install; anything else is a bug, so say so and
    point at --debug."""
    if isinstance(exc, ImportError) and (missing := from_import_error(exc)) is not None:
        exc = missing
    if isinstance(exc, ZkConsumerError):
        return str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or exc}"
    return (f"unexpected {type(exc).__name__}: {exc} (a bug: please report it with the "
            "output of --debug)")


if __name__ == "__main__":
    sys.exit(main())
