"""Launch a real, standalone Apache ZooKeeper (Debian's ``zookeeper`` package) for dev and tests.

Used by the test suite (one server per run), the README demo and ``zkconsumer dev-cluster``.
It writes its own ``zoo.cfg`` and ``log4j.properties`` into ``data_dir`` and runs
``java ... org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg`` -- the same server a
production ensemble member runs, only standalone, so tests see real sessions, real
ephemeral znodes, real watches and real session expiry.

Invariants:

* The server listens on 127.0.0.1 only; ``port=0`` picks a free port.
* ``minSessionTimeout`` is lowered to 1000 ms so tests can use short sessions (stock
  ZooKeeper clamps anything below 2 x tickTime = 4000 ms).
* `ZooKeeperServer.start` returns only once the server answers ``ruok`` with ``imok``;
  on failure or timeout it stops the process and raises `ZooKeeperError` with the log tail.
* `ZooKeeperServer.stop` always reaps the process (terminate, then kill).
* ``security`` (`zkconsumer.devcluster.zksecure.ServerSecurity`) adds a TLS
  ``secureClientPort`` (``secure_port``; with ``plain=False`` the only port) and/or SASL;
  ``client_security`` is then the `ZkSecurity` a client needs to talk to it.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.devcluster.zksecure import PreparedSecurity, ServerSecurity, prepare
from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.security import ZkSecurity

__all__ = ["ZooKeeperInstall", "ZooKeeperServer", "find_zookeeper", "four_letter_word"]

log = logging.getLogger(__name__)

_JAVA_DIR = Path("/usr/share/java")
_ZK_HOME = Path("/usr/share/zookeeper")
_INSTALL_HINT = (
    "Apache ZooKeeper was not found. On Debian/Ubuntu install it with "
    "`sudo apt-get install -y zookeeper` (it provides /usr/share/java/zookeeper.jar and "
    "needs a Java runtime, e.g. `default-jre-headless`); or set ZKCONSUMER_ZOOKEEPER_CLASSPATH "
    "to a classpath holding zookeeper.jar and its dependencies, and ZKCONSUMER_JAVA to java."
)


@dataclass(frozen=True, slots=True)
class ZooKeeperInstall:
    """Where the ZooKeeper jars and the ``java`` binary are."""

    java: str
    classpath: tuple[str, ...]

    @property
    def classpath_string(self) -> str:
        return os.pathsep.join(self.classpath)


def find_zookeeper() -> ZooKeeperInstall:
    """Locate java and the ZooKeeper jars, or raise `ZooKeeperError` saying how to install.

    Debian's ``zookeeper.jar`` lists its dependencies in its manifest ``Class-Path``; we add
    only an SLF4J binding and log4j so the server logs to a file we can show on failure.
    """
    java = os.environ.get("ZKCONSUMER_JAVA") or shutil.which("java")
    if not java:
        raise ZooKeeperError("java was not found on PATH. " + _INSTALL_HINT)
    env_cp = os.environ.get("ZKCONSUMER_ZOOKEEPER_CLASSPATH")
    if env_cp:
        return ZooKeeperInstall(java, tuple(p for p in env_cp.split(os.pathsep) if p))
    jar = _JAVA_DIR / "zookeeper.jar"
    if not jar.is_file():
        raise ZooKeeperError(f"{jar} does not exist. " + _INSTALL_HINT)
    cp = [str(jar)]
    for extra in ("zookeeper-jute.jar", "slf4j-log4j12.jar", "log4j-1.2.jar"):
        if (_JAVA_DIR / extra).is_file():
            cp.append(str(_JAVA_DIR / extra))
    return ZooKeeperInstall(java, tuple(cp))


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """Linux: have the kernel SIGTERM the JVM when the process that started it dies, so a
    killed test run or dev cluster never leaves an orphan ZooKeeper eating memory."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except Exception:
        pass


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 2.0,
                     tls: ssl.SSLContext | None = None) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``stat``, ``mntr``...) and return the
    reply; over TLS with ``tls`` (a secure-only port)."""
    with socket.create_connection((host, port), timeout=timeout) as raw, \
            (tls.wrap_socket(raw, server_hostname=host) if tls else raw) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _port_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now (SO_REUSEADDR, as the JVM binds:
    a port only in TIME_WAIT counts as free)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class _PortTaken(Exception):
    """The JVM could not bind the port we picked (someone else took it first)."""


class ZooKeeperServer:
    """A standalone ZooKeeper process; ``with ZooKeeperServer(tmpdir) as zk: zk.connect_string``."""

    def __init__(self, data_dir: Path | str, port: int = 0, host: str = "127.0.0.1", *,
                 tick_time_ms: int = 2000, min_session_timeout_ms: int = 1000,
                 max_session_timeout_ms: int = 60000, heap: str = "256m",
                 start_timeout: float = 30.0, install: ZooKeeperInstall | None = None,
                 die_with_parent: bool = True, security: ServerSecurity | None = None,
                 secure_port: int = 0) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.host = host
        self._requested_port = port
        self.port = port
        self.security = security or ServerSecurity()
        self._requested_secure_port = secure_port
        self.secure_port = secure_port
        self._prepared: PreparedSecurity | None = None
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap = heap
        self.start_timeout = start_timeout
        self._install = install
        # PR_SET_PDEATHSIG fires when the *thread* that forked exits: start from a thread that
        # lives as long as the server (the main thread), or pass die_with_parent=False.
        self.die_with_parent = die_with_parent and sys.platform == "linux"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """The plain port, or the secure one when there is no plain port."""
        if self.security.tls and not self.security.plain:
            return self.secure_connect_string
        return f"{self.host}:{self.port}"

    @property
    def secure_connect_string(self) -> str:
        return f"{self.host}:{self.secure_port}"

    @property
    def client_security(self) -> ZkSecurity:
        """Client settings matching this server (its CA, a client certificate, a SASL user)."""
        return self._prepared.client if self._prepared else ZkSecurity()

    def _prepare_security(self) -> PreparedSecurity:
        if self._prepared is None:
            self._prepared = prepare(self.security, self.data_dir)
        return self._prepared

    @property
    def log_file(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _write_config(self) -> tuple[Path, Path]:
        snap = self.data_dir / "data"
        snap.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "zoo.cfg"
        ports = ""
        if self.security.plain or not self.security.tls:
            ports += f"clientPort={self.port}\nclientPortAddress={self.host}\n"
        if self.security.tls:
            ports += (f"secureClientPort={self.secure_port}\n"
                      f"secureClientPortAddress={self.host}\n")
        extra = "".join(f"{line}\n" for line in self._prepare_security().cfg_lines)
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\n"
            f"dataDir={snap}\n"
            + ports + extra +
            f"minSessionTimeout={self.min_session_timeout_ms}\n"
            f"maxSessionTimeout={self.max_session_timeout_ms}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=*\n"
            # no snapshot/txn-log purging concerns for throwaway servers, but keep fsync
            # from dominating test time on a loaded machine
            "forceSync=no\n"
        )
        log4j = self.data_dir / "log4j.properties"
        log4j.write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log_file}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern="
            "%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n\n"
        )
        return cfg, log4j

    def log_tail(self, lines: int = 30) -> str:
        texts = []
        for f in (self.log_file, self.data_dir / "zookeeper.out"):
            try:
                texts.append("\n".join(f.read_text(errors="replace").splitlines()[-lines:]))
            except OSError:
                continue
        return "\n".join(t for t in texts if t) or "(no log output)"

    def start(self) -> ZooKeeperServer:
        """Start the server and wait until it answers ``ruok``; idempotent while running.

        With ``port=0`` a free port is picked; if another process grabs it before the JVM
        binds it (a race other test runs on the machine can cause), a new port is tried.
        """
        if self.is_running():
            return self
        install = self._install or find_zookeeper()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._requested_port:
            # A port someone asked for and that is taken is an operator's mistake: say it in
            # one line at once, instead of a JVM start and 30 lines of BindException.
            self.port = self._requested_port
            if not _port_free(self.host, self.port):
                raise ZooKeeperError(self._port_taken_message())
        attempts = 1 if self._requested_port else 3
        for attempt in range(1, attempts + 1):
            try:
                self._start_once(install)
                return self
            except _PortTaken:
                if attempt == attempts:
                    raise ZooKeeperError(self._port_taken_message()
                                         + f" (ZooKeeper log: {self.log_file})") from None
                log.info("port %s was taken; retrying on another port", self.port)
        return self  # unreachable

    def _port_taken_message(self) -> str:
        return (f"ZooKeeper port {self.port} is already in use on {self.host} (stop what "
                "listens there, or pick another port)")

    def _start_once(self, install: ZooKeeperInstall) -> None:
        # outside the ephemeral range: a kill -9 and restart keeps the port (see ports.py)
        self.port = self._requested_port or restartable_port(self.host)
        if self.security.tls:
            self.secure_port = self._requested_secure_port or restartable_port(self.host)
        cfg, log4j = self._write_config()
        prepared = self._prepare_security()
        cmd = [
            install.java, f"-Xmx{self.heap}", "-Xss1m", "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # C1 only: faster start-up, less CPU on small machines
            f"-Dlog4j.configuration={log4j.as_uri()}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dzookeeper.admin.enableServer=false",
            *prepared.jvm_args,
            "-cp", os.pathsep.join((*install.classpath, *prepared.classpath)),
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg),
        ]
        log.info("starting ZooKeeper on %s (data in %s)", self.connect_string, self.data_dir)
        self.log_file.unlink(missing_ok=True)
        with (self.data_dir / "zookeeper.out").open("ab") as out:
            proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.data_dir,
                preexec_fn=_die_with_parent if self.die_with_parent else None)
        self._proc = proc
        try:
            self._wait_ready(proc)
        except BaseException:
            self.stop()
            raise

    def _answers_as_us(self) -> bool:
        """``ruok`` says *a* server is up; ``conf`` tells whether it is ours (our dataDir)."""
        port, tls = self.port, None
        if self.security.tls and not self.security.plain:
            port, tls = self.secure_port, self.client_security.ssl_context()
        try:
            if four_letter_word(self.host, port, "ruok", timeout=1.0, tls=tls) != "imok":
                return False
            conf = four_letter_word(self.host, port, "conf", timeout=1.0, tls=tls)
        except OSError:
            return False
        return f"dataDir={self.data_dir / 'data' / 'version-2'}\n" in conf

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        delay = 0.05
        while True:
            code = proc.poll()
            if code is not None:
                if "Address already in use" in self.log_tail(200):
                    raise _PortTaken()
                raise ZooKeeperError(
                    f"ZooKeeper exited with status {code} while starting on "
                    f"{self.connect_string}; log tail:\n{self.log_tail()}")
            if self._answers_as_us():
                return
            if time.monotonic() > deadline:
                raise ZooKeeperError(
                    f"ZooKeeper did not answer on {self.connect_string} within "
                    f"{self.start_timeout:.0f} s; log tail:\n{self.log_tail()}")
            time.sleep(delay)  # polling a child process, not a test waiting
            delay = min(delay * 1.5, 0.5)

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (kill after ``timeout``) and reap it.  Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.info("ZooKeeper on %s stopped", self.connect_string)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"ZooKeeperServer({self.connect_string}, {state}, data_dir={self.data_dir})"
