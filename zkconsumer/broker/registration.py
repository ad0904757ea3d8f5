"""The dev broker's ZooKeeper registration, as server/KafkaZooKeeper.scala does it.

Znodes (REFERENCE §1), all written through `zkconsumer.zk.session.ZkSession`:

* ``/brokers/ids/<id>`` -- ephemeral, ``creatorId:host:port`` with ``creatorId = host + "-" +
  millis``; written at startup and again (with a fresh creatorId) after a session expiry.
* ``/brokers/topics/<topic>/<id>`` -- ephemeral, the broker-local partition count as decimal;
  written at startup for every topic that has a log, when a topic's first log is created here,
  and again after a session expiry.
* Parents (``/brokers``, ``/brokers/ids``, ``/brokers/topics/<topic>``) are persistent with
  **null** data, as zkclient creates them.

Invariants
    * A ``/brokers/ids/<id>`` that exists with other data (another live broker, or a previous
      incarnation whose session has not expired yet) makes `start` raise `BrokerStartupError`:
      two brokers with one id would corrupt every client's view of the cluster.
    * New-topic registrations run on one background thread (the reference's actor), so a
      produce never waits for ZooKeeper; failures are logged, and the topic is still
      re-registered after the next session expiry.
    * `close` ends the session, so the ephemeral znodes vanish at once (clean deregistration).
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterable

from zkconsumer.errors import BrokerStartupError, ZkConsumerError
from zkconsumer.zk.paths import (
    BrokerInfo,
    broker_id_path,
    encode_partition_count,
    topic_broker_path,
)
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.session import ZkSession

__all__ = ["BrokerRegistrar", "default_host", "ensure_chroot"]

log = logging.getLogger(__name__)


def default_host() -> str:
    """InetAddress.getLocalHost.getHostAddress: this machine's address (127.0.0.1 fallback)."""
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def ensure_chroot(connect: str, *, timeout_ms: int = 6000,
                  security: ZkSecurity | None = None) -> None:
    """Create the chroot of a connect string (``host:port/chroot``) if it is missing.

    A chroot that does not exist makes every create under it fail; the reference leaves
    that to the operator, the dev broker just creates it (persistent, null data).
    """
    slash = connect.find("/")
    if slash < 0 or connect[slash:] in ("", "/"):
        return
    session = ZkSession(connect[:slash], session_timeout_ms=timeout_ms,
                        connection_timeout_ms=timeout_ms, security=security)
    session.start()
    try:
        session.ensure_persistent(connect[slash:].rstrip("/"))
    finally:
        session.close()


class BrokerRegistrar:
    """Registers one broker and its topics in ZooKeeper and keeps them registered."""

    def __init__(self, connect: str, broker_id: int, host: str, port: int, *,
                 partition_count: Callable[[str], int],
                 session_timeout_ms: int = 6000, connection_timeout_ms: int = 6000,
                 registration_wait_ms: int = 0, security: ZkSecurity | None = None) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self._partition_count = partition_count
        self._registration_wait_ms = registration_wait_ms
        self.session = ZkSession(connect, session_timeout_ms=session_timeout_ms,
                                 connection_timeout_ms=connection_timeout_ms, security=security)
        self._topics: list[str] = []
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None
        self.info: BrokerInfo | None = None
        self._pending = 0
        self._idle = threading.Condition(self._lock)

    # ---------------------------------------------------------------- lifecycle
    def start(self, topics: Iterable[str]) -> None:
        """Connect, register the broker (or raise), then every topic already on disk."""
        ensure_chroot(self.session.connect, timeout_ms=self.session.connection_timeout_ms,
                      security=self.session.security)
        self.session.start()
        try:
            self._register_broker(initial=True)
            for topic in topics:
                self._register_topic(topic)
        except BaseException:
            self.session.close()
            raise
        self.session.add_new_session_listener(self._on_new_session)
        self._worker = threading.Thread(target=self._run, name=f"broker-{self.broker_id}-zk",
                                        daemon=True)
        self._worker.start()

    def close(self) -> None:
        """Stop the worker and end the session (the ephemeral znodes disappear)."""
        self._queue.put(None)
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout=10)
        self.session.close()

    # ---------------------------------------------------------------- registration
    def _register_broker(self, *, initial: bool) -> None:
        path = broker_id_path(self.broker_id)
        deadline = time.monotonic() + self._registration_wait_ms / 1000.0
        while True:
            info = BrokerInfo.create(self.broker_id, self.host, self.port)
            log.info("registering broker %s", path)
            if self.session.create_ephemeral_expect_conflict(path, info.encode()):
                self.info = info
                log.info("registering broker %s succeeded with %s", path, info.zk_string)
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.2)  # a previous incarnation's session may expire in the meantime
        held = self.session.get(path)
        message = (f"a broker is already registered on the path {path} ({held!r}). This "
                   "probably indicates that you either have configured a brokerid that is "
                   "already in use, or else you have shutdown this broker and restarted it "
                   "faster than the zookeeper timeout so it appears to be re-registering.")
        if initial:
            raise BrokerStartupError(message)
        log.error("%s", message)

    def _register_topic(self, topic: str) -> None:
        path = topic_broker_path(topic, self.broker_id)
        n = self._partition_count(topic)
        log.info("begin registering broker topic %s with %d partitions", path, n)
        if not self.session.create_ephemeral_expect_conflict(path, encode_partition_count(n)):
            log.error("cannot register %s: it exists with other data %r", path,
                      self.session.get(path))
        with self._lock:
            if topic not in self._topics:
                self._topics.append(topic)
        log.info("end registering broker topic %s", path)

    def topic_created(self, topic: str) -> None:
        """A topic got its first log here: register it (asynchronously, like the actor)."""
        with self._lock:
            self._pending += 1
        self._queue.put(topic)

    def _run(self) -> None:
        while True:
            topic = self._queue.get()
            if topic is None:
                return
            try:
                self._register_topic(topic)
            except ZkConsumerError:
                log.exception("registering topic %r failed", topic)
                with self._lock:
                    if topic not in self._topics:
                        self._topics.append(topic)
            with self._lock:
                self._pending -= 1
                self._idle.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every queued topic registration has been attempted."""
        with self._lock:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def _on_new_session(self) -> None:
        """handleNewSession: the old session's ephemeral znodes are gone; write them again."""
        log.info("re-registering broker info in ZK for broker %d", self.broker_id)
        self._register_broker(initial=False)
        with self._lock:
            topics = list(self._topics)
        log.info("re-registering broker topics in ZK for broker %d", self.broker_id)
        for topic in topics:
            try:
                self._register_topic(topic)
            except ZkConsumerError:
                log.exception("re-registering topic %r failed", topic)
        log.info("done re-registering broker")

    @property
    def topics(self) -> list[str]:
        with self._lock:
            return list(self._topics)
