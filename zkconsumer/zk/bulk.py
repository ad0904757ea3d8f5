"""Pipelined reads of many znodes: what a monitor needs to read thousands of znodes per poll.

`ZkSession` runs one request at a time (send, wait for the answer): right for a consumer
that reads a few znodes per rebalance, far too slow for a monitor that reads every offset and
owner znode of 500 groups every interval (tens of thousands of reads; at one round trip each
the poll would take longer than the interval).  ZooKeeper answers the requests of one session
in order, so `BulkReader` sends up to ``window`` requests before waiting for the first answer:
the same reads, the same session, one round trip per window instead of per znode.

Invariants:

* Reads only; no watches are left behind.
* "No node" is a result (``None`` / ``[]``), as in `ZkSession`; a request that fails for
  another reason is retried once through `ZkSession` (which retries across connection loss
  with its own bound), and a failure there raises `ZooKeeperError` -- kazoo exceptions never
  leave this module.
* ``reads`` counts every request sent to the server (the monitor reports it as its cost).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import NoNodeError

from zkconsumer.zk.session import ZkSession, ZnodeInfo

__all__ = ["BulkReader"]

#: Requests in flight at once: enough to hide the round trip on a LAN, small enough that a
#: slow server sees a bounded queue from us.
DEFAULT_WINDOW = 500


class BulkReader:
    """Children and data of many znodes over one `ZkSession`, ``window`` requests in flight."""

    def __init__(self, session: ZkSession, *, window: int = DEFAULT_WINDOW) -> None:
        self.session = session
        self.window = max(1, window)
        self.reads = 0

    def children(self, paths: Sequence[str]) -> dict[str, list[str]]:
        """``{path: sorted child names}``; ``[]`` for a znode that does not exist."""
        raw = self._pipeline(paths, "get_children_async", self.session.get_children)
        return {p: sorted(v) if v is not None else [] for p, v in raw.items()}

    def nodes(self, paths: Sequence[str]) -> dict[str, ZnodeInfo | None]:
        """``{path: ZnodeInfo}``; ``None`` for a znode that does not exist."""
        raw = self._pipeline(paths, "get_async", self.session.get_node)
        out: dict[str, ZnodeInfo | None] = {}
        for path, value in raw.items():
            if value is None or isinstance(value, ZnodeInfo):
                out[path] = value
            else:
                data, stat = value
                out[path] = ZnodeInfo(None if data is None else bytes(data), stat.version,
                                      stat.ephemeralOwner, stat.numChildren, stat.ctime,
                                      stat.mtime)
        return out

    def _pipeline(self, paths: Sequence[str], method: str, fallback: Any) -> dict[str, Any]:
        client = self.session.client
        out: dict[str, Any] = {}
        for start in range(0, len(paths), self.window):
            chunk = paths[start:start + self.window]
            pending = [(p, getattr(client, method)(p)) for p in chunk]
            self.reads += len(chunk)
            timeout = self.session.operation_timeout_ms / 1000.0
            for path, result in pending:
                try:
                    out[path] = result.get(timeout=timeout)
                except NoNodeError:
                    out[path] = None
                except Exception:  # connection loss, timeout...: the bounded, translated path
                    self.reads += 1
                    out[path] = fallback(path)
        return out
