"""`--notify-url`: one JSON POST per status change of a group, retried, never blocking a poll.

Body (``Content-Type: application/json``)::

    {"group": "billing", "status": "STALL", "previous": "OK", "time": 1764150000.0,
     "total_lag": 5120, "reasons": ["events/0-0 STALL: lag 5120, offset 1024 unchanged ..."]}

``previous`` is ``null`` for a group seen for the first time (a monitor start reports every
group once, so the receiver learns the starting point).

Invariants: `Notifier.notify` only enqueues (a bounded queue; when a dead receiver lets it
fill up, the oldest change is dropped with a WARNING) -- the poll loop never waits on the
network.  One sender thread POSTs in order; a failure (connection refused, timeout, a non-2xx
answer) is retried with `zkconsumer.backoff.Backoff` up to ``attempts`` times, then dropped with
a WARNING naming the group.  The URL is logged without its query string and user info (a
webhook token lives there).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import queue
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from zkconsumer.backoff import Backoff
from zkconsumer.monitor.model import GroupEval, Status

__all__ = ["Notifier", "redact_url"]

log = logging.getLogger(__name__)


def redact_url(url: str) -> str:
    """``scheme://host[:port]/path`` -- no user info, no query (secrets live there)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class Notifier:
    """A queue and a sender thread for one webhook URL."""

    def __init__(self, url: str, *, attempts: int = 5, timeout: float = 5.0,
                 backoff_initial: float = 0.5, backoff_max: float = 30.0,
                 max_queue: int = 1000) -> None:
        self.url = url
        self.attempts = attempts
        self.timeout = timeout
        self.sent = 0
        self.dropped = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(max_queue)
        self._stop = threading.Event()
        self._backoff = Backoff(backoff_initial, backoff_max, jitter=0.2, sleep=self._stop.wait)
        self._thread = threading.Thread(target=self._run, name="zkconsumer-monitor-notify",
                                        daemon=True)
        self._thread.start()

    def notify(self, ev: GroupEval, previous: Status | None) -> None:
        body = {"group": ev.group, "status": ev.status.value,
                "previous": None if previous is None else previous.value,
                "time": ev.evaluated_at, "total_lag": ev.total_lag, "reasons": ev.reasons[:20]}
        while True:
            try:
                self._queue.put_nowait(body)
                return
            except queue.Full:
                try:
                    lost = self._queue.get_nowait()
                except queue.Empty:
                    continue
                self.dropped += 1
                log.warning("monitor: webhook queue full, dropping the change of %s to %s",
                            lost and lost["group"], lost and lost["status"])

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            body = self._queue.get()
            if body is None:
                return
            self._send(body)

    def _send(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self._backoff.reset()
        for attempt in range(1, self.attempts + 1):
            req = urllib.request.Request(self.url, data=data, method="POST",
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    resp.read()
                self.sent += 1
                return
            except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
                why = exc  # refused, timed out, a non-2xx answer, a garbled one
            log.info("monitor: webhook %s failed (attempt %d of %d): %s",
                     redact_url(self.url), attempt, self.attempts, why)
            if attempt == self.attempts or not self._backoff.wait():
                break
        self.dropped += 1
        log.warning("monitor: gave up notifying %s of group %s -> %s after %d attempt(s)",
                    redact_url(self.url), body["group"], body["status"], self.attempts)
