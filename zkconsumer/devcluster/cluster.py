"""A whole dev cluster on one machine: one real ZooKeeper plus N dev brokers.

Job: what ``zkconsumer dev-cluster``, the demo and multi-broker tests need -- start Debian's
ZooKeeper (`ZooKeeperServer`) and N brokers registered in it, hand out the connect string and
the broker list, and stop everything again.

Layout under ``base_dir``::

    zookeeper/            ZooKeeper data dir and its log
    broker-<id>/          log.dir of broker <id> (segment files)
    broker-<id>.log       that broker's stderr (subprocess brokers)

Invariants
    * Broker ids are ``0 .. brokers-1``; with ``broker_ports``/a base port broker i listens on
      the given port, else on any free port.
    * `DevCluster.start` returns when ZooKeeper answers and every broker is registered; if any
      part fails, whatever was started is stopped again before the error propagates.
    * `DevCluster.stop` stops brokers cleanly (SIGTERM: flush + deregister) before ZooKeeper.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from zkconsumer.devcluster.brokers import DevBroker, DevBrokerProcess
from zkconsumer.devcluster.zksecure import ServerSecurity
from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.errors import ConfigurationError
from zkconsumer.zk.security import ZkSecurity

__all__ = ["DevCluster"]

log = logging.getLogger(__name__)


class DevCluster:
    """``with DevCluster(tmpdir, brokers=2) as c: c.zk_connect, c.broker_list``.

    ``broker_settings`` are `BrokerConfig` fields applied to every broker (``flush_interval``,
    ``log_file_size``...).  ``in_process=True`` runs the brokers as threads of this process
    (`DevBroker`) instead of child processes (`DevBrokerProcess`).
    """

    def __init__(self, base_dir: str | Path, brokers: int = 2, zk_port: int = 0,
                 broker_ports: Sequence[int] | None = None, *, num_partitions: int = 1,
                 topic_partitions: Mapping[str, int] | None = None, chroot: str = "",
                 in_process: bool = False, zk_security: ServerSecurity | None = None,
                 **broker_settings: Any) -> None:
        if brokers < 1:
            raise ConfigurationError(f"brokers: at least one broker, got {brokers}")
        if broker_ports is not None and len(broker_ports) != brokers:
            raise ConfigurationError(
                f"broker_ports: {len(broker_ports)} ports for {brokers} brokers")
        if chroot and (not chroot.startswith("/") or chroot == "/"):
            raise ConfigurationError(f"chroot: must start with '/', got {chroot!r}")
        self.base_dir = Path(base_dir)
        self.zookeeper = ZooKeeperServer(self.base_dir / "zookeeper", port=zk_port,
                                         security=zk_security)
        self.chroot = chroot.rstrip("/")
        self.num_brokers = brokers
        self.broker_ports = list(broker_ports) if broker_ports is not None else [0] * brokers
        self.in_process = in_process
        self.broker_settings = dict(broker_settings)
        self.broker_settings["num_partitions"] = num_partitions
        self.broker_settings["topic_partitions"] = dict(topic_partitions or {})
        self.brokers: list[DevBroker | DevBrokerProcess] = []

    @property
    def zk_connect(self) -> str:
        """The ZooKeeper connect string clients use (with the chroot, if any)."""
        return f"{self.zookeeper.connect_string}{self.chroot}"

    @property
    def zk_secure_connect(self) -> str | None:
        """The TLS (secureClientPort) connect string, with the chroot; None without TLS."""
        if not self.zookeeper.security.tls:
            return None
        return f"{self.zookeeper.secure_connect_string}{self.chroot}"

    @property
    def client_security(self) -> ZkSecurity:
        """What a client needs on `zk_secure_connect` (or `zk_connect` with SASL only)."""
        return self.zookeeper.client_security

    def _broker_security(self) -> ZkSecurity:
        """The brokers use `zk_connect`: plain unless there is no plain port (TLS-only)."""
        sec = self.client_security
        if self.zookeeper.connect_string == self.zookeeper.secure_connect_string:
            return sec
        return dataclasses.replace(sec, tls_ca=None, tls_cert=None, tls_key=None)

    @property
    def broker_list(self) -> str:
        """``id:host:port,...`` -- the producer's ``broker.list`` format."""
        return ",".join(f"{b.broker_id}:{b.address}" for b in self.brokers)

    def start(self) -> DevCluster:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.zookeeper.start()
            self.broker_settings.setdefault("zk_security", self._broker_security())
            for broker_id, port in enumerate(self.broker_ports):
                log_dir = self.base_dir / f"broker-{broker_id}"
                broker: DevBroker | DevBrokerProcess
                if self.in_process:
                    broker = DevBroker(broker_id, log_dir, zk_connect=self.zk_connect,
                                       port=port, **self.broker_settings)
                else:
                    broker = DevBrokerProcess(
                        broker_id, log_dir, zk_connect=self.zk_connect, port=port,
                        log_file=self.base_dir / f"broker-{broker_id}.log",
                        **self.broker_settings)
                self.brokers.append(broker)
                broker.start()
        except BaseException:
            self.stop()
            raise
        log.info("dev cluster up: zookeeper %s, brokers %s", self.zk_connect, self.broker_list)
        return self

    def stop(self) -> None:
        """Stop every broker (cleanly), then ZooKeeper.  Idempotent."""
        for broker in reversed(self.brokers):
            try:
                broker.stop()
            except Exception:
                log.exception("error stopping %r", broker)
        self.zookeeper.stop()

    def __enter__(self) -> DevCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
