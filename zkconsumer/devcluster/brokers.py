"""Dev brokers for tests, the demo and ``zkconsumer dev-cluster``: in-process or subprocess.

* `DevBroker` -- a `zkconsumer.broker.server.Broker` running in this process (its own
  threads), started by the constructor's ``start()``; cheap, for most tests.
* `DevBrokerProcess` -- ``python -m zkconsumer broker ...`` as a child process, for what needs
  a real process boundary: ``kill()`` (SIGKILL: no flush, no deregistration; the ephemeral
  znodes linger until the session times out) and ``terminate()`` (SIGTERM: clean stop).

Both default to *dev* settings, unlike the 0.7 defaults of the broker itself: advertised and
bound on 127.0.0.1, any free port, flush after every message (``flush_interval=1``) and every
100 ms, so a produced message is visible to fetch at once.  Pass the 0.7 values explicitly to
test flush behaviour.

Invariant: ``start()`` returns only when the broker accepts connections **and**, with ZooKeeper,
its ``/brokers/ids/<id>`` registration carries this broker's host and port.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import zkconsumer
from zkconsumer.broker.config import PROPERTY_NAMES, BrokerConfig
from zkconsumer.broker.server import Broker
from zkconsumer.devcluster.ports import restartable_port
from zkconsumer.errors import BrokerStartupError, ZkConsumerError
from zkconsumer.zk.paths import broker_id_path
from zkconsumer.zk.security_config import zk_security_flags
from zkconsumer.zk.session import ZkSession

__all__ = ["DEV_DEFAULTS", "DevBroker", "DevBrokerProcess", "dev_broker_config"]

#: Settings the dev brokers use unless told otherwise (fast visibility, loopback only).
DEV_DEFAULTS: Mapping[str, Any] = {
    "host": "127.0.0.1",
    "bind": "127.0.0.1",
    "port": 0,
    "flush_interval": 1,
    "flush_interval_ms": 100,
    "flush_scheduler_interval_ms": 100,
}


def dev_broker_config(broker_id: int, log_dir: str | Path, *, zk_connect: str | None = None,
                      **settings: Any) -> BrokerConfig:
    """A BrokerConfig with `DEV_DEFAULTS` under ``settings`` (BrokerConfig field names)."""
    values = dict(DEV_DEFAULTS)
    values.update(settings)
    if not values.get("port"):
        # "any free port", but one a restart after kill -9 can take again (see ports.py)
        values["port"] = restartable_port(str(values.get("host") or "127.0.0.1"))
    return BrokerConfig(broker_id=broker_id, log_dir=str(log_dir), zk_connect=zk_connect,
                        **values)


class DevBroker:
    """An in-process dev broker.  ``DevBroker(0, tmp / "b0", zk_connect=...).start()``.

    ``settings`` are `BrokerConfig` fields (``num_partitions=4``, ``topic_partitions={"t": 2}``,
    ``log_file_size=1024``, ``flush_interval=500``...).
    """

    def __init__(self, broker_id: int, log_dir: str | Path, *, zk_connect: str | None = None,
                 cleanup_interval_s: float | None = None, **settings: Any) -> None:
        self.config = dev_broker_config(broker_id, log_dir, zk_connect=zk_connect, **settings)
        self.broker = Broker(self.config, cleanup_interval_s=cleanup_interval_s)

    def start(self) -> DevBroker:
        self.broker.start()
        return self

    def stop(self) -> None:
        self.broker.stop()

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def log_dir(self) -> Path:
        return Path(self.config.log_dir)

    @property
    def host(self) -> str:
        return self.broker.host

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def zk_connect(self) -> str | None:
        return self.config.zk_connect

    def __enter__(self) -> DevBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DevBroker(id={self.broker_id}, {self.address}, {self.log_dir})"


def _flag_args(config: BrokerConfig) -> list[str]:
    """CLI flags reproducing ``config`` (every field differing from the 0.7 default)."""
    args = ["--broker-id", str(config.broker_id), "--log-dir", config.log_dir,
            "--port", str(config.port)]
    defaults = BrokerConfig(broker_id=0, log_dir="x")
    flags = {"host": "--host", "bind": "--bind", "zk_connect": "--zk",
             "num_partitions": "--num-partitions", "log_file_size": "--log-file-size",
             "flush_interval": "--flush-interval", "max_message_size": "--max-message-size",
             "max_request_size": "--max-request-size",
             "zk_session_timeout_ms": "--zk-session-timeout-ms",
             "registration_wait_ms": "--registration-wait-ms"}
    for name, flag in flags.items():
        value = getattr(config, name)
        if value != getattr(defaults, name) and value is not None:
            args += [flag, str(value)]
    if config.topic_partitions:
        args += ["--topic-partitions",
                 ",".join(f"{t}:{n}" for t, n in config.topic_partitions.items())]
    if config.flush_interval_ms != defaults.flush_interval_ms or \
            config.flush_scheduler_interval_ms != defaults.flush_scheduler_interval_ms:
        args += ["--flush-ms", str(config.flush_scheduler_interval_ms)]
        if config.flush_interval_ms != config.flush_scheduler_interval_ms:
            args += ["--property", f"log.default.flush.interval.ms={config.flush_interval_ms}"]
    if config.fsync:
        args.append("--fsync")
    args += zk_security_flags(config.zk_security)
    done = {*flags, "broker_id", "log_dir", "port", "topic_partitions", "flush_interval_ms",
            "flush_scheduler_interval_ms", "fsync"}
    for key, name in PROPERTY_NAMES.items():  # everything else as 0.7 properties
        value = getattr(config, name)
        if name in done or value == getattr(defaults, name):
            continue
        if isinstance(value, Mapping):
            value = ",".join(f"{t}:{n}" for t, n in value.items())
        elif isinstance(value, bool):
            value = str(value).lower()
        args += ["--property", f"{key}={value}"]
    return args


class DevBrokerProcess:
    """A dev broker in a child process (``python -m zkconsumer broker``).

    ``settings`` are `BrokerConfig` fields, as for `DevBroker`; ``extra_args`` are appended to
    the command line (e.g. ``["--property", "log.retention.size=100"]``).  stderr goes to
    ``<log_dir>/../broker-<id>.log`` unless ``log_file`` is given.
    """

    def __init__(self, broker_id: int, log_dir: str | Path, *, zk_connect: str | None = None,
                 extra_args: Sequence[str] = (), log_file: str | Path | None = None,
                 env: Mapping[str, str] | None = None, start_timeout: float = 30.0,
                 **settings: Any) -> None:
        self.config = dev_broker_config(broker_id, log_dir, zk_connect=zk_connect, **settings)
        self.extra_args = list(extra_args)
        self.log_file = Path(log_file) if log_file else \
            Path(self.config.log_dir).parent / f"broker-{broker_id}.log"
        self.env = dict(env) if env is not None else None
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = self.config.port
        self.host = self.config.host or "127.0.0.1"

    @property
    def broker_id(self) -> int:
        return self.config.broker_id

    @property
    def log_dir(self) -> Path:
        return Path(self.config.log_dir)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "zkconsumer", "broker", *_flag_args(self.config),
                *self.extra_args]

    def start(self) -> DevBrokerProcess:
        """Spawn the broker and wait until it serves (and is registered, with ZooKeeper)."""
        if self.is_running():
            return self
        env = dict(os.environ if self.env is None else self.env)
        root = str(Path(zkconsumer.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as err:
            self.proc = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=err,
                                         stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + self.start_timeout
        try:
            self.host, self.port = self._read_banner(self.proc, deadline)
            if self.config.uses_zookeeper and self.config.zk_connect is not None:
                self._wait_registered(self.config.zk_connect, deadline)
        except BaseException:
            self.kill()
            raise
        return self

    def _read_banner(self, proc: subprocess.Popen[bytes], deadline: float) -> tuple[str, int]:
        line = b""
        fd = proc.stdout.fileno() if proc.stdout is not None else -1
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if ready:
                chunk = os.read(fd, 1)
                if not chunk:
                    break
                line += chunk
        text = line.decode("utf-8", "replace").strip()
        if " listening on " not in text:
            raise BrokerStartupError(
                f"dev broker {self.broker_id} did not start (exit code {proc.poll()}); "
                f"last log lines:\n{self.log_tail()}")
        host, _, port = text.rsplit(" ", 1)[1].rpartition(":")
        return host, int(port)

    def _wait_registered(self, connect: str, deadline: float) -> None:
        want = f":{self.host}:{self.port}".encode()
        session = ZkSession(connect, security=self.config.zk_security)
        try:
            session.start()
            while time.monotonic() < deadline:
                data = session.get(broker_id_path(self.broker_id))
                if data is not None and data.endswith(want):
                    return
                time.sleep(0.05)
        except ZkConsumerError as exc:
            raise BrokerStartupError(f"cannot check registration of broker "
                                     f"{self.broker_id}: {exc}") from exc
        finally:
            session.close()
        raise BrokerStartupError(f"broker {self.broker_id} not registered in time")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _signal(self, sig: int, timeout: float) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL: no flush, no deregistration (a crash).  Returns the exit status."""
        return self._signal(signal.SIGKILL, 10.0)

    def terminate(self, timeout: float = 15.0) -> int | None:
        """SIGTERM: clean stop (flush, deregister); SIGKILL after ``timeout``."""
        return self._signal(signal.SIGTERM, timeout)

    def stop(self) -> None:
        self.terminate()

    def __enter__(self) -> DevBrokerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.terminate()

    def __repr__(self) -> str:
        return f"DevBrokerProcess(id={self.broker_id}, {self.address}, pid={self.pid})"
