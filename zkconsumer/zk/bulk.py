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
* `create_many` (for benchmarks and tests that build large groups) creates parents before
  children (one pipelined round per depth) and treats an existing znode as created.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from zkconsumer.zk.session import ZkSession, ZnodeInfo

__all__ = ["BulkReader", "create_many", "versioned_children"]

#: Requests in flight at once: enough to hide the round trip on a LAN, small enough that a
#: slow server sees a bounded queue from us.
DEFAULT_WINDOW = 500


def versioned_children(value: Any) -> tuple[list[str], tuple[int, int] | None]:
    """A getChildren2 answer ``(children, stat)`` as ``(sorted children, (czxid,
    cversion))``; ``None`` (no node) or a bare list (read without a stat) has no version."""
    if value is None:
        return [], None
    if isinstance(value, list):
        return sorted(value), None
    children, stat = value
    return sorted(children), (stat.czxid, stat.cversion)


class BulkReader:
    """Children and data of many znodes over one `ZkSession`, ``window`` requests in flight."""

    def __init__(self, session: ZkSession, *, window: int = DEFAULT_WINDOW) -> None:
        self.session = session
        self.window = max(1, window)
        self.reads = 0

    def close(self) -> None:
        """Nothing to release (the session is the caller's); for symmetry with
        `zkconsumer.zk.pipeline.PipelinedReader`."""

    def children(self, paths: Sequence[str]) -> dict[str, list[str]]:
        """``{path: sorted child names}``; ``[]`` for a znode that does not exist."""
        raw = self._pipeline(paths, "get_children_async", self.session.get_children)
        return {p: sorted(v) if v is not None else [] for p, v in raw.items()}

    def children_versioned(self, paths: Sequence[str]
                           ) -> dict[str, tuple[list[str], tuple[int, int] | None]]:
        """``{path: (sorted children, (czxid, cversion))}`` (`PipelinedReader` has the same);
        ``([], None)`` for a missing znode or one read through the fallback (no stat)."""
        raw = self._pipeline(paths, "get_children_async", self.session.get_children,
                             include_data=True)
        return {path: versioned_children(value) for path, value in raw.items()}

    def nodes(self, paths: Sequence[str]) -> dict[str, ZnodeInfo | None]:
        """``{path: ZnodeInfo}``; ``None`` for a znode that does not exist."""
        raw = self._pipeline(paths, "get_async", self.session.get_node)
        return {path: value if value is None or isinstance(value, ZnodeInfo)
                else ZnodeInfo.of(*value) for path, value in raw.items()}

    def _pipeline(self, paths: Sequence[str], method: str, fallback: Any,
                  **kw: Any) -> dict[str, Any]:
        client = self.session.client
        out: dict[str, Any] = {}
        for start in range(0, len(paths), self.window):
            chunk = paths[start:start + self.window]
            pending = [(p, getattr(client, method)(p, **kw)) for p in chunk]
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


def create_many(session: ZkSession, nodes: Sequence[tuple[str, bytes | None, bool]], *,
                window: int = DEFAULT_WINDOW) -> None:
    """Create ``(path, data, ephemeral)`` znodes, missing persistent null-data parents
    included (zkclient's ``createPersistent(path, true)``), ``window`` requests in flight."""
    wanted: dict[str, tuple[bytes | None, bool]] = {}
    for path, data, ephemeral in nodes:
        parts = path.split("/")
        for i in range(2, len(parts)):
            wanted.setdefault("/".join(parts[:i]), (None, False))
        wanted[path] = (data, ephemeral)
    by_depth: dict[int, list[str]] = {}
    for path in wanted:
        by_depth.setdefault(path.count("/"), []).append(path)
    client = session.client
    for depth in sorted(by_depth):
        paths = by_depth[depth]
        for start in range(0, len(paths), window):
            pending = [(p, client.create_async(p, wanted[p][0], ephemeral=wanted[p][1]))
                       for p in paths[start:start + window]]
            for path, result in pending:
                try:
                    result.get(timeout=session.operation_timeout_ms / 1000.0)
                except NodeExistsError:
                    pass
                except Exception:  # the bounded, translated path (raises ZooKeeperError)
                    data, ephemeral = wanted[path]
                    if ephemeral:
                        session.create_ephemeral_expect_conflict(path, data or b"")
                    elif data is None:
                        session.ensure_persistent(path)
                    else:
                        session.update_persistent(path, data)
