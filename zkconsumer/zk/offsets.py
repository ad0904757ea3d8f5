"""Consumer-group offsets in ZooKeeper: ``/consumers/<g>/offsets/<topic>/<B-P>``.

The value is the decimal *byte* offset of the next message to fetch, in a **persistent**
znode, written with Scala's ``updatePersistentPath`` semantics.  Scala and Python members of a
group read each other's offsets, so the format is exact (`zkconsumer.zk.paths.encode_offset`).

Invariants:

* Never writes an empty or negative value (samsa's empty znodes crash Scala's ``toLong``).
* A missing znode is ``None`` (the consumer then applies ``autooffset.reset``); garbage
  raises `ZnodeDataError` unless the caller asks to skip it.
"""

from __future__ import annotations

import logging

from zkconsumer.errors import ZnodeDataError
from zkconsumer.zk.paths import (
    encode_offset,
    offset_path,
    offsets_path,
    offsets_topic_path,
    parse_offset,
)
from zkconsumer.zk.session import ZkSession

__all__ = ["commit_offset", "read_group_offsets", "read_offset", "read_topic_offsets"]

log = logging.getLogger(__name__)


def read_offset(session: ZkSession, group: str, topic: str, partition: str) -> int | None:
    """The committed offset of partition ``"B-P"``, or ``None`` if none was committed."""
    path = offset_path(group, topic, partition)
    data = session.get(path)
    return None if data is None else parse_offset(path, data)


def commit_offset(session: ZkSession, group: str, topic: str, partition: str,
                  offset: int) -> None:
    """Write the offset (creating the znode and its null-data parents if needed)."""
    session.update_persistent(offset_path(group, topic, partition), encode_offset(offset))


def read_topic_offsets(session: ZkSession, group: str, topic: str, *,
                       strict: bool = True) -> dict[str, int]:
    """``{"B-P": offset}`` for one topic.  ``strict=False`` logs and skips garbage values."""
    result: dict[str, int] = {}
    for pname in session.get_children(offsets_topic_path(group, topic)):
        try:
            value = read_offset(session, group, topic, pname)
        except ZnodeDataError as exc:
            if strict:
                raise
            log.warning("skipping unreadable offset: %s", exc)
            continue
        if value is not None:
            result[pname] = value
    return result


def read_group_offsets(session: ZkSession, group: str, *,
                       strict: bool = True) -> dict[str, dict[str, int]]:
    """``{topic: {"B-P": offset}}`` for every committed offset of a group (ExportZkOffsets)."""
    result: dict[str, dict[str, int]] = {}
    for topic in session.get_children(offsets_path(group)):
        offsets = read_topic_offsets(session, group, topic, strict=strict)
        if offsets:
            result[topic] = offsets
    return result
