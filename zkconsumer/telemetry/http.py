"""``/metrics`` and ``/healthz`` over HTTP, for any command that keeps its own registry.

Why one server for the daemon, the mirror and the monitor: all answer the same two endpoints
the same way (an operator's scrape config and probes do not care which command runs), and
only what is rendered differs -- the daemon's `DaemonMetrics`, the mirror's `MirrorMetrics`,
the monitor's `MonitorMetrics`.  The monitor serves more (its page and JSON API): it passes
``routes``, asked for every other path.

Invariants
    * ``/metrics`` answers ``render()`` of the object given, in Prometheus text format;
      ``/healthz`` answers 200 when ``health()`` says ok, else 503, with its reason as the body.
    * A port that cannot be bound is a one-line `ConfigurationError` naming the address and
      port (two instances given the same ``--metrics-port``), raised before anything starts.
    * The server thread is a daemon thread and `MetricsServer.close` ends it and frees the port;
      requests are logged at DEBUG only (a scrape every few seconds must not fill the log).
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST

from zkconsumer.errors import ConfigurationError

__all__ = ["MetricsServer", "Renders", "Response"]

#: What a ``routes`` function answers: status, content type, body.
Response = tuple[int, str, bytes]

log = logging.getLogger(__name__)


class Renders(Protocol):
    """What `MetricsServer` serves: a registry rendered in Prometheus text format."""

    def render(self) -> bytes: ...


class MetricsServer:
    """``/metrics`` and ``/healthz`` on ``host:port`` (port 0 = any free port) in a thread."""

    def __init__(self, host: str, port: int, metrics: Renders,
                 health: Callable[[], tuple[bool, str]], *,
                 routes: Callable[[str], Response | None] | None = None,
                 port_flag: str = "--metrics-port") -> None:
        render = metrics.render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, CONTENT_TYPE_LATEST, render())
                elif path == "/healthz":
                    ok, reason = health()
                    self._send(200 if ok else 503, "text/plain; charset=utf-8",
                               (reason + "\n").encode())
                elif routes is not None and (answer := routes(self.path)) is not None:
                    self._send(*answer)
                else:
                    self._send(404, "text/plain; charset=utf-8", b"try /metrics or /healthz\n")

            def _send(self, status: int, ctype: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("metrics http: " + format, *args)

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:  # a second instance on the same port, a foreign address...
            raise ConfigurationError(
                f"{port_flag}: cannot listen on {host}:{port} for /metrics and /healthz: "
                f"{exc.strerror or exc}" + (" (another process uses it: give every instance "
                                            f"its own {port_flag})"
                                            if exc.errno == errno.EADDRINUSE else "")) from exc
        self._server.daemon_threads = True
        self.host = host
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="zkconsumer-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()
        log.info("metrics on http://%s:%d/metrics and /healthz", self.host, self.port,
                 extra={"event": "metrics_listen", "port": self.port})

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
