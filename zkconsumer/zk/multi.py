"""Several compare-and-sets in one ZooKeeper ``multi``: all or none, one round trip.

Why: the bridge (`zkconsumer.mirror.bridge_target`) moves one checkpoint per 0.7 partition
twice per round (its intent, then where the batch landed).  One request per znode is one
round trip each, and kazoo's connection thread wakes once per request: beside a busy
interpreter (the bridge's loop thread routing the next round) one such set took 8-45 ms in
the bridge's writer, so four partitions cost up to a third of a second per round.  A
``multi`` is one request and one wake-up whatever the number of znodes.

Invariants:

* All or none: either every znode was at its expected version and all were written, or none
  was (`set_if_versions` returns ``None`` and the caller looks again, znode by znode).
* Retried across connection losses like every `ZkSession` operation (`ZkSession._op`): a
  retry of a multi that landed finds new versions and returns ``None``, never writes twice.
* Errors other than "changed or vanished" raise `ZooKeeperError`, as `ZkSession`'s do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError

from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.paths import check_znode_path
from zkconsumer.zk.session import ZkSession

__all__ = ["set_if_versions"]

_LOOK_AGAIN = (BadVersionError, NoNodeError, RolledBackError)


def set_if_versions(session: ZkSession, writes: Sequence[tuple[str, bytes, int]]
                    ) -> list[int] | None:
    """Write every ``(path, data, version)`` if each znode is still at its ``version``.

    Returns the new versions in order, or ``None`` if any znode changed or vanished since
    (nothing was written).  Paths are checked as `ZkSession` checks them (absolute, no
    ``.``/``..``, inside the chroot)."""
    if not writes:
        return []

    def commit() -> Any:  # a transaction commits once: a retry builds a new one
        tx = session.client.transaction()
        for path, data, version in writes:
            tx.set_data(path, data, version)
        return tx.commit_async()

    for path, _data, _version in writes[1:]:  # `_op` checks the first one
        check_znode_path("multi set", path)
    results = session._op("multi", writes[0][0], commit)  # the zk package's own plumbing
    if any(isinstance(r, _LOOK_AGAIN) for r in results):
        return None
    for (path, _data, _version), r in zip(writes, results, strict=True):
        if isinstance(r, Exception):
            raise ZooKeeperError(f"multi set {path}: {type(r).__name__} {r}")
    return [int(r.version) for r in results]

