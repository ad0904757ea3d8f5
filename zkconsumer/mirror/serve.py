"""Run one mirror engine under the CLI: signals, ``--progress``, ``/metrics``, the last line.

Both directions of ``zkconsumer mirror`` (0.7 -> target, and the ``--from kafka://`` bridge)
end in `serve`, so SIGTERM/SIGINT, the status line, the metrics server and the summary behave
the same for both.  What differs -- how an engine reports its lag -- comes in as a `Telemetry`.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from zkconsumer.mirror.config import MirrorConfig
from zkconsumer.mirror.metrics import (
    MirrorCollector,
    MirrorMetrics,
    MirrorProgress,
    MirrorStats,
    start_metrics_server,
)

__all__ = ["Engine", "Telemetry", "serve"]

log = logging.getLogger(__name__)


class Engine(Protocol):
    stats: MirrorStats
    #: called every ``mirror.progress.interval.ms`` from the engine's loop with a snapshot
    progress: Callable[[dict[str, Any]], None] | None

    def run(self) -> None: ...
    def stop(self) -> None: ...


@dataclass(frozen=True)
class Telemetry:
    """How an engine's lag is seen: ``partitions`` (per source partition, the consumer's
    ``{"lag": bytes, "committed": offset}``), ``lag_bytes`` (their sum), ``behind`` (the lag
    in messages, when known directly) and ``owned`` (source partitions owned)."""

    owned: Callable[[], int]
    partitions: Callable[[], dict[str, dict[str, Any]]] | None = None
    lag_bytes: Callable[[], int | None] = lambda: None
    behind: Callable[[], int | None] = lambda: None


def serve(engine: Engine, config: MirrorConfig, telemetry: Telemetry, *, mode: str,
          metrics_host: str, show_progress: bool) -> int:
    """Run ``engine`` until a signal or a fatal error (raised); 0 after a clean stop."""
    bar = MirrorProgress(sys.stderr, interval=config.progress_interval_ms / 1000.0,
                         force=True) if show_progress else None
    if bar is not None:
        def progress(snap: dict[str, Any]) -> None:
            bar.update(snap, telemetry.lag_bytes(), telemetry.owned(), telemetry.behind())

        engine.progress = progress
    server = None
    if config.metrics_port is not None:
        def health() -> tuple[bool, str]:
            unreachable = engine.stats.zk_unreachable
            if unreachable is not None:
                return False, f"not connected to ZooKeeper: {unreachable}"
            if engine.stats.healthy:
                return True, "ok"
            return False, "target failing; retrying (offsets not advancing)"

        collector = MirrorCollector(engine.stats, telemetry.partitions, telemetry.behind)
        server = start_metrics_server(config.metrics_port, MirrorMetrics(collector), health,
                                      host=metrics_host)

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping (waiting for in-flight acks, then committing)", signum)
        engine.stop()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    log.info("%s", mode)
    try:
        engine.run()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if server is not None:
            server.close()
        if bar is not None:
            bar.finish()
    snap = engine.stats.snapshot()
    log.info("mirror stopped: %d messages (%d bytes) mirrored, %d target errors, %d retries",
             snap["messages"], snap["bytes"], snap["target_errors"], snap["retries"])
    return 0
