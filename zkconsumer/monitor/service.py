"""`Monitor`: poll, remember, evaluate, publish -- every ``interval`` seconds, in one thread.

The loop is thin on purpose: `zkconsumer.monitor.sampler` reads, `zkconsumer.monitor.store`
remembers, `zkconsumer.monitor.evaluator` decides (pure).  What it publishes (`Monitor.state`)
is replaced as a whole after each poll, so the HTTP threads read one consistent poll without
locks beyond the reference swap.

Invariants: a failing poll (ZooKeeper unreachable, a bug) is logged and counted, and the
previous evaluation stays published with its age -- the monitor never stops because of what
it watches; a group's status change is handed to the notifier (never blocking the loop).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from zkconsumer.monitor.evaluator import EvalConfig, evaluate_group
from zkconsumer.monitor.mirrors import read_target
from zkconsumer.monitor.model import Cycle, GroupEval, Status, worst
from zkconsumer.monitor.sampler import Sampler
from zkconsumer.monitor.store import WindowStore

__all__ = ["Monitor", "MonitorState"]

log = logging.getLogger(__name__)


@dataclass
class MonitorState:
    """One published evaluation plus the monitor's own cost counters."""

    groups: dict[str, GroupEval] = field(default_factory=dict)
    polled_at: float | None = None
    polls: int = 0
    poll_failures: int = 0
    last_error: str | None = None
    last_duration: float = 0.0
    zk_reads_total: int = 0
    broker_requests_total: int = 0
    broker_errors_total: int = 0
    last_zk_reads: int = 0


class Monitor:
    """Owns a `Sampler` and a `WindowStore`; `poll_once` or `start` a polling thread."""

    def __init__(self, sampler: Sampler, store: WindowStore, cfg: EvalConfig, *,
                 on_change: Callable[[GroupEval, Status | None], None] | None = None,
                 mirrors: Mapping[str, str] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.sampler = sampler
        self.store = store
        self.cfg = cfg
        self.on_change = on_change
        self.mirrors = dict(mirrors or {})  # group -> the mirror process's /metrics URL
        self._clock = clock
        self.state = MonitorState()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store_lock = threading.Lock()  # the store is read by HTTP threads too

    def poll_once(self) -> MonitorState:
        """One poll and evaluation; publishes and returns the new state."""
        old = self.state
        try:
            cycle = self.sampler.poll()
        except Exception as exc:  # the monitor outlives what it watches
            log.warning("monitor: poll failed (the last evaluation stays published): %s", exc)
            self.state = replace(old, poll_failures=old.poll_failures + 1,
                                 last_error=str(exc))
            return self.state
        with self._store_lock:
            self.store.add(cycle)
            groups = {g: evaluate_group(obs, self.store.samples(g), cycle.time, self.cfg,
                                        self.store.history(g))
                      for g, obs in cycle.groups.items()}
        for name, url in self.mirrors.items():
            if name in groups:
                _attach_target(groups[name], read_target(url))
        self.state = _published(old, cycle, groups)
        log.debug("monitor: polled %d group(s) in %.3f s, %d ZooKeeper reads", len(groups),
                  cycle.duration, cycle.zk_reads)
        if self.on_change is not None:
            for name, ev in groups.items():
                before = old.groups.get(name)
                if before is None or before.status is not ev.status:
                    self.on_change(ev, None if before is None else before.status)
        return self.state

    def partition_history(self, group: str) -> dict[str, list[tuple[float, int | None]]]:
        """``{"topic/B-P": [(time, lag), ...]}`` of one group, for its page's charts."""
        with self._store_lock:
            return {f"{t}/{p}": [(s.time, s.lag) for s in window]
                    for (t, p), window in sorted(self.store.samples(group).items())}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="zkconsumer-monitor",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.poll_once()
            except Exception as exc:  # a bug in evaluation: say so, keep polling
                log.exception("monitor: evaluating a poll failed")
                self.state = replace(self.state, poll_failures=self.state.poll_failures + 1,
                                     last_error=f"evaluation failed: {exc!r}")
            self._stop.wait(max(self.cfg.interval - (time.monotonic() - started), 0.0))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def _attach_target(ev: GroupEval, target: dict[str, Any]) -> None:
    """A mirror's target side beside its group: a target that refuses writes (the mirror
    retrying) is at least a WARN; a mirror that does not answer is a note (the group itself
    says whether it consumes)."""
    ev.target = target
    if "error" in target:
        ev.reasons.append(target["error"])
    elif target.get("healthy") == 0:
        ev.reasons.append("the mirror's target does not accept writes (the mirror retries)")
        ev.status = worst([ev.status, Status.WARN])


def _published(old: MonitorState, cycle: Cycle, groups: dict[str, GroupEval]) -> MonitorState:
    return MonitorState(groups, cycle.time, old.polls + 1, old.poll_failures, None,
                        cycle.duration, old.zk_reads_total + cycle.zk_reads,
                        old.broker_requests_total + cycle.broker_requests,
                        old.broker_errors_total + cycle.broker_errors, cycle.zk_reads)

