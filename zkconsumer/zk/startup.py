"""Start-up checks and retries of a ZooKeeper connection, before any session exists.

Two questions a command asks before (or while) it connects, kept apart from `ZkSession`'s
operations:

* does any host of the connect string resolve?  A name that does not resolve is a setting
  to fix, so it is one error line at once instead of a wait for the connection timeout;
* does ZooKeeper answer yet?  A long-running command (``run``, ``mirror``) started together
  with -- or before -- its ensemble keeps trying with backoff (`start_when_reachable`)
  instead of exiting into a supervisor's crash loop; a one-shot command keeps its one
  bounded wait.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import TypeVar

from zkconsumer.backoff import Backoff
from zkconsumer.errors import ZooKeeperError, ZooKeeperUnreachableError

__all__ = ["check_hosts_resolve", "start_when_reachable"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def start_when_reachable(start: Callable[[], T], backoff: Backoff, *,
                         on_retry: Callable[[ZooKeeperUnreachableError], None] | None = None,
                         ) -> T | None:
    """Call ``start`` until ZooKeeper answers: the start-up of a long-running command.

    ``start`` connects a *fresh* `ZkSession` (itself, or through a ``GroupConsumer``) and
    returns what it started.  When no server answers within the connection timeout
    (`ZooKeeperUnreachableError`), the attempt is logged (WARNING, ``event=zk_connect_retry``),
    ``on_retry(error)`` is called, and after ``backoff.next_delay()`` it is tried again --
    until ``backoff``'s deadline (the ``--startup-timeout``; then the last error is raised,
    with the number of attempts) or until its sleep is interrupted (a stop request: returns
    None).  Every other error (a host that does not resolve, a missing chroot, refused
    credentials) is raised at once: retrying cannot fix a setting.  Jitter in ``backoff``
    keeps many members started together from retrying in step against a struggling ensemble.
    """
    while True:
        try:
            return start()
        except ZooKeeperUnreachableError as exc:
            if backoff.expired():
                raise ZooKeeperUnreachableError(
                    f"{exc} (gave up after {backoff.attempts + 1} attempts: "
                    "--startup-timeout)") from exc
            delay = backoff.next_delay()
            log.warning("ZooKeeper not answering (attempt %d): %s; retrying in %.1fs",
                        backoff.attempts, exc, delay,
                        extra={"event": "zk_connect_retry", "attempt": backoff.attempts})
            if on_retry is not None:
                on_retry(exc)
            if not backoff.sleep(delay):
                return None


def check_hosts_resolve(connect: str, hosts: list[tuple[str, int]]) -> None:
    """`ZooKeeperError` if no host of the connect string resolves; a warning for some."""
    bad: list[str] = []
    reason = ""
    for host, port in hosts:
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            bad.append(host)
            reason = getattr(exc, "strerror", None) or str(exc)
    if not bad:
        return
    names = ", ".join(repr(h) for h in bad)
    if len(bad) == len(hosts):
        raise ZooKeeperError(
            f"cannot connect to ZooKeeper at {connect!r}: host "
            f"{names} {'does' if len(bad) == 1 else 'do'} not resolve ({reason}); "
            "check the host name in --zk / zk.connect")
    log.warning("ZooKeeper host(s) %s of %r do not resolve (%s); using the others",
                names, connect, reason)
