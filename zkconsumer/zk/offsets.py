"""Consumer-group offsets in ZooKeeper: ``/consumers/<g>/offsets/<topic>/<B-P>``.

The value is the decimal *byte* offset of the next message to fetch, in a **persistent**
znode, written with Scala's ``updatePersistentPath`` semantics.  Scala and Python members of a
group read each other's offsets, so the format is exact (`zkconsumer.zk.paths.encode_offset`).

Invariants:

* Never writes an empty or negative value (samsa's empty znodes crash Scala's ``toLong``).
* A missing znode is ``None`` (the consumer then applies ``autooffset.reset``); garbage
  raises `ZnodeDataError` unless the caller asks to skip it.
* `commit_offset_cas` never moves a stored offset backwards unless its caller says it may
  (the group consumer: only while it owns the partition on the session it claimed it in).
  It is a compare-and-set on the znode version, so a write that is retried late -- after a
  connection loss, even onto a new session -- cannot clobber what another member wrote
  meanwhile.  Scala members write without versions; that only bumps the version, which
  makes our next write look again (and proceed if it may).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

from zkconsumer.errors import ZnodeDataError, ZooKeeperError
from zkconsumer.zk.paths import (
    encode_offset,
    offset_path,
    offsets_path,
    offsets_topic_path,
    parse_offset,
)
from zkconsumer.zk.session import ZkSession

__all__ = [
    "OffsetWrite",
    "commit_offset",
    "commit_offset_cas",
    "read_group_offsets",
    "read_offset",
    "read_offset_versioned",
    "read_topic_offsets",
]

log = logging.getLogger(__name__)


def read_offset(session: ZkSession, group: str, topic: str, partition: str) -> int | None:
    """The committed offset of partition ``"B-P"``, or ``None`` if none was committed."""
    path = offset_path(group, topic, partition)
    data = session.get(path)
    return None if data is None else parse_offset(path, data)


class OffsetWrite(NamedTuple):
    """Outcome of `commit_offset_cas`.

    ``written``: the znode now holds our offset (we wrote it, or it already did).  Otherwise
    ``stored`` is the offset found there, which we were not allowed to move back from.
    ``version`` is the znode version after a write (pass it to the next call), else ``None``.
    """

    written: bool
    stored: int | None
    version: int | None


def read_offset_versioned(session: ZkSession, group: str, topic: str,
                          partition: str) -> tuple[int | None, int | None]:
    """``(offset, znode version)``; ``(None, None)`` if no offset was committed."""
    path = offset_path(group, topic, partition)
    node = session.get_node(path)
    if node is None:
        return None, None
    return parse_offset(path, node.data if node.data is not None else b""), node.version


def commit_offset_cas(session: ZkSession, group: str, topic: str, partition: str,
                      offset: int, *, version: int | None,
                      may_rewind: Callable[[int], bool], attempts: int = 10) -> OffsetWrite:
    """Write ``offset`` by compare-and-set; move a stored offset backwards only if allowed.

    ``version`` is the znode version the caller last read or wrote (``None``: unknown, read
    first).  A write at that version cannot rewind anybody: nobody wrote since.  When the
    znode changed, it is read again: an equal offset counts as written, a smaller one is
    overwritten (moving forward loses nothing: everything before ``offset`` was processed),
    a larger one only if ``may_rewind(stored)`` says so.  An unreadable value is
    overwritten (it would crash Scala members).  Raises `ZooKeeperError` on ZooKeeper
    failures or when the znode keeps changing for ``attempts`` rounds.
    """
    path = offset_path(group, topic, partition)
    data = encode_offset(offset)
    for _ in range(attempts):
        if version is None:
            node = session.get_node(path)
            if node is None:
                if session.create_if_absent(path, data):
                    return OffsetWrite(True, offset, 0)
                continue  # created by someone else just now: look at it
            try:
                stored: int | None = parse_offset(path, node.data or b"")
            except ZnodeDataError as exc:
                log.warning("overwriting an unreadable offset: %s", exc)
                stored = None
            if stored == offset:
                return OffsetWrite(True, offset, node.version)
            if stored is not None and stored > offset and not may_rewind(stored):
                return OffsetWrite(False, stored, None)
            version = node.version
        new_version = session.set_if_version(path, data, version)
        if new_version is not None:
            return OffsetWrite(True, offset, new_version)
        version = None  # changed under us (another writer, or our own retried write)
    raise ZooKeeperError(f"commit {path}: the offset keeps changing under us")


def commit_offset(session: ZkSession, group: str, topic: str, partition: str,
                  offset: int) -> None:
    """Write the offset unconditionally (creating the znode and its null-data parents if
    needed): for tools (import, reset).  Group members use `commit_offset_cas`."""
    session.update_persistent(offset_path(group, topic, partition), encode_offset(offset))


def read_topic_offsets(session: ZkSession, group: str, topic: str, *,
                       strict: bool = True,
                       skipped: list[ZnodeDataError] | None = None) -> dict[str, int]:
    """``{"B-P": offset}`` for one topic.  ``strict=False`` logs and skips garbage values,
    appending each one's error to ``skipped`` when given (so a caller can fail or report)."""
    result: dict[str, int] = {}
    for pname in session.get_children(offsets_topic_path(group, topic)):
        try:
            value = read_offset(session, group, topic, pname)
        except ZnodeDataError as exc:
            if strict:
                raise
            log.warning("skipping unreadable offset: %s", exc)
            if skipped is not None:
                skipped.append(exc)
            continue
        if value is not None:
            result[pname] = value
    return result


def read_group_offsets(session: ZkSession, group: str, *, strict: bool = True,
                       skipped: list[ZnodeDataError] | None = None
                       ) -> dict[str, dict[str, int]]:
    """``{topic: {"B-P": offset}}`` for every committed offset of a group (ExportZkOffsets).

    ``strict=False``: garbage values are skipped (and appended to ``skipped`` if given)."""
    result: dict[str, dict[str, int]] = {}
    for topic in session.get_children(offsets_path(group)):
        offsets = read_topic_offsets(session, group, topic, strict=strict, skipped=skipped)
        if offsets:
            result[topic] = offsets
    return result
