"""A minimal W3C WebDriver client over urllib, for Debian's chromium + chromedriver.

Selenium is not a dependency of this project; the handful of WebDriver commands a page test
needs (new session, navigate, run a script, click, screenshot) are plain JSON over HTTP.
The browser is headless, sandbox-less (we run as root in CI), without GPU, QUIC, first-run,
background networking, component updates or sync, with a fresh profile directory.
"""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fixtures.waiting import wait_until

CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,900"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """chromedriver on a loopback port driving one headless chromium session."""

    def __init__(self, profile_dir: Path, log_path: Path) -> None:
        driver = shutil.which("chromedriver")
        chromium = shutil.which("chromium")
        if not driver or not chromium:
            raise AssertionError("chromium and chromium-driver must be installed "
                                 "(.ci/setup installs them)")
        self.port = _free_port()
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([driver, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: self._call("GET", "/status")["ready"], timeout=30,
                   what="chromedriver ready")
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium,
                                   "args": [*CHROME_FLAGS, f"--user-data-dir={profile_dir}"]}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return json.loads(resp.read())["value"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"webdriver {method} {path}: {exc.code} "
                                 f"{exc.read()[:500]!r}") from None

    def _s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    def go(self, url: str) -> None:
        self._call("POST", self._s("/url"), {"url": url})

    def script(self, source: str, *args: Any) -> Any:
        return self._call("POST", self._s("/execute/sync"), {"script": source, "args": list(args)})

    def text(self) -> str:
        return str(self.script("return document.body.innerText"))

    def url(self) -> str:
        return str(self._call("GET", self._s("/url")))

    def click_link(self, text: str) -> None:
        elem = self._call("POST", self._s("/element"),
                          {"using": "link text", "value": text})
        (ref,) = elem.values()
        self._call("POST", self._s(f"/element/{ref}/click"), {})

    def screenshot(self, path: Path) -> Path:
        png = base64.b64decode(self._call("GET", self._s("/screenshot")))
        path.write_bytes(png)
        return path

    def close(self) -> None:
        try:
            self._call("DELETE", self._s(""))
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self._log.close()
