"""`restartable_port`: a free loopback port a dev server can be restarted on after a kill -9.

A port the kernel hands out for ``bind(0)`` comes from the *ephemeral* range
(``/proc/sys/net/ipv4/ip_local_port_range``, 32768-60999 by default), the same range every
outgoing connection's local port is drawn from.  A dev broker or ZooKeeper killed and
restarted on "its" port can then find it taken by some client's connection made in between
("Address already in use") -- rare on a quiet machine, regular under a fault-injection soak
with hundreds of connections.  Ports below the ephemeral range are never used for outgoing
connections, so a server that picked one keeps it across restarts.

Invariant: the port returned was free when checked (bind, then closed); another *listener*
may still take it in between -- the servers' own start-up reports that.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["restartable_port"]

_LOWEST = 10000  # below: well-known and registered services people run on dev machines


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def restartable_port(host: str = "127.0.0.1", *, attempts: int = 200) -> int:
    """A free TCP port on ``host`` outside the ephemeral range (or any free port if none).

    Random, so that parallel test runs rarely try the same one.
    """
    high = _ephemeral_low() - 1
    rng = random.SystemRandom()
    if high > _LOWEST:
        for _ in range(attempts):
            port = rng.randint(_LOWEST, high)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
