"""The monitor's HTTP side: the web page, the JSON API and ``/metrics``, on one port.

Routes (all GET):

* ``/`` and ``/groups/NAME`` -- the page (``static/index.html``; its script reads the path and
  fetches the API, then refreshes itself every few seconds without reloading);
  ``/static/app.js``, ``/static/style.css`` -- shipped as package data, no build step, no CDN;
* ``/v1/groups`` -- a JSON list, one object per group: ``group``, ``status``, ``reasons``,
  ``members``, ``partitions`` (each with ``status``, ``offset``, ``log_end``, ``lag``,
  ``owner``...), ``total_lag``, ``trend``; ``?history=1`` adds each group's ``history`` of
  ``[time, total lag]`` points (the overview's sparklines);
* ``/v1/groups/NAME`` -- one group with ``history`` and ``partition_history``
  (``{"topic/B-P": [[time, lag], ...]}``); 404 with ``{"error": ...}`` for an unknown group;
* ``/v1/monitor`` -- the monitor's own state: last poll time and duration, reads, failures;
* ``/metrics`` -- Prometheus (`zkconsumer.monitor.metrics`); ``/healthz`` -- 200 once a poll
  succeeded and the last one is younger than three intervals, else 503 with the reason.

Invariants: handlers only read the published `MonitorState` (and the store under the
monitor's lock); the server (`zkconsumer.telemetry.http.MetricsServer`, shared with the daemon
and the mirror) runs in a daemon thread, `MonitorServer.close` frees the port, a port that
cannot be bound is one `ConfigurationError` naming ``--port``, and requests are logged at
DEBUG only.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from importlib import resources
from typing import Any

from zkconsumer.monitor.metrics import MonitorMetrics
from zkconsumer.monitor.service import Monitor
from zkconsumer.telemetry.http import MetricsServer, Response

__all__ = ["MonitorServer", "monitor_json"]

_STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8",
           "index.html": "text/html; charset=utf-8"}


def _static(name: str) -> bytes:
    return (resources.files("zkconsumer.monitor") / "static" / name).read_bytes()


def monitor_json(monitor: Monitor) -> dict[str, Any]:
    st = monitor.state
    return {"polled_at": st.polled_at, "polls": st.polls, "poll_failures": st.poll_failures,
            "last_error": st.last_error, "poll_duration": st.last_duration,
            "poll_zookeeper_reads": st.last_zk_reads, "zookeeper_reads": st.zk_reads_total,
            "broker_requests": st.broker_requests_total, "interval": monitor.cfg.interval,
            "window": monitor.cfg.window}


class MonitorServer:
    """Serves one `Monitor` on ``host:port`` (port 0 = any free port) in a thread: the
    `zkconsumer.telemetry.http.MetricsServer` every command uses, with the page and the API
    as its extra routes."""

    def __init__(self, monitor: Monitor, host: str, port: int) -> None:
        self.monitor = monitor
        self._server = MetricsServer(host, port, MonitorMetrics(lambda: monitor.state),
                                     lambda: _health(monitor), routes=self._route,
                                     port_flag="--port")
        self.host = host
        self.port = self._server.port

    def _route(self, raw_path: str) -> Response:
        url = urllib.parse.urlsplit(raw_path)
        path = urllib.parse.unquote(url.path)
        query = urllib.parse.parse_qs(url.query)
        monitor = self.monitor
        if path == "/" or path.startswith("/groups/"):
            return 200, _STATIC["index.html"], _static("index.html")
        if path.startswith("/static/") and path[8:] in _STATIC:
            return 200, _STATIC[path[8:]], _static(path[8:])
        if path == "/v1/groups":
            history = query.get("history", ["0"])[0] not in ("0", "")
            return _json(200, [ev.as_dict(history=history)
                               for _, ev in sorted(monitor.state.groups.items())])
        if path.startswith("/v1/groups/"):
            name = path[len("/v1/groups/"):]
            ev = monitor.state.groups.get(name)
            if ev is None:
                return _json(404, {"error": f"no consumer group {name!r} in the last poll"})
            out = ev.as_dict()
            out["partition_history"] = monitor.partition_history(name)
            return _json(200, out)
        if path == "/v1/monitor":
            return _json(200, monitor_json(monitor))
        return _json(404, {"error": f"no such page: {path}"})

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        self._server.start()

    def close(self) -> None:
        self._server.close()


def _json(status: int, body: Any) -> Response:
    return status, "application/json", json.dumps(body).encode()


def _health(monitor: Monitor) -> tuple[bool, str]:
    st = monitor.state
    if st.polled_at is None:
        return False, f"no successful poll yet ({st.last_error or 'starting'})"
    age = time.time() - st.polled_at
    if age > 3 * monitor.cfg.interval + st.last_duration:
        return False, f"last successful poll {age:.0f} s ago ({st.last_error or 'stuck?'})"
    return True, f"ok: {len(st.groups)} group(s), polled {age:.0f} s ago"
