"""``zkconsumer bench NAME``: run one benchmark module of ``zkconsumer.bench``.

Each benchmark is a module ``zkconsumer/bench/<name>.py`` exposing ``HELP``,
``configure(parser)`` and ``main(args) -> int`` exactly like a top-level command.  Modules
that are not written yet, or whose optional dependencies are missing, are skipped silently, so
the dispatcher works while the project grows and without the optional extras.
Benchmarks print one line per case ending with the figure, e.g.
``decode none 100B: 1234567 msg/s (123.4 MB/s)``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from types import ModuleType

log = logging.getLogger(__name__)

HELP = ("run a benchmark (codec, broker, produce, fetch, group, daemon, export, mirror, soak, "
        "monitor, simulate, zkconnect)")

#: Benchmark names, in the order of ``zkconsumer bench --help``.
NAMES: tuple[str, ...] = (
    "codec", "broker", "produce", "fetch", "group", "daemon", "export", "mirror", "soak",
    "monitor", "simulate", "zkconnect",
)


def _load(name: str) -> ModuleType | None:
    module_name = f"zkconsumer.bench.{name}"
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Not written yet, or it needs an optional extra that is not installed (pyspark for
        # ``export``, kafka-python for ``mirror``): leave it out rather than break the CLI.
        log.debug("benchmark %s unavailable: %s", name, exc)
        return None


def available() -> dict[str, ModuleType]:
    """The benchmark modules that exist, by name."""
    found = {}
    for name in NAMES:
        module = _load(name)
        if module is not None:
            found[name] = module
    return found


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Each prints one line per case ending with its figure; methods and results: "
                     "docs/performance.md.\n\n"
                     "examples:\n  zkconsumer bench codec --codec gzip --size 100\n"
                     "  zkconsumer bench group --members 2,4 --skip-consume\n"
                     "  zkconsumer bench NAME --help\n\n"
                     "exit status: 0 done, 1 error, 2 usage (or no NAME given)")
    sub = parser.add_subparsers(dest="bench", metavar="NAME")
    for name, module in available().items():
        cmd = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(cmd)
        cmd.set_defaults(_bench_main=module.main)
    parser.set_defaults(_bench_parser=parser)


def main(args: argparse.Namespace) -> int:
    run = getattr(args, "_bench_main", None)
    if run is None:
        args._bench_parser.print_help()
        return 2
    return int(run(args) or 0)
