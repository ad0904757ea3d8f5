"""The bridges (modern Kafka -> 0.7, `zkconsumer.mirror.bridge`) as the monitor sees them.

A bridge leaves everything the monitor needs in the 0.7 cluster's ZooKeeper
(`zkconsumer.zk.paths`, "the bridge"): its live processes under
``/zkconsumer/bridge/<group>/members`` and, per 0.7 partition it writes, a checkpoint with
``end`` (the byte offset after its last confirmed batch: the *target* progress) and
``sources`` (per source partition ``"topic/p"``, the next source offset not yet written: the
*source* progress).  Each bridge group becomes one monitor entry named ``bridge:<group>``
(kind ``"bridge"``), one row per 0.7 partition: ``offset`` = the checkpoint's ``end``,
``log_end`` = the partition's log end (beyond ``end`` only when another producer writes the
partition too), ``sources`` = the source positions.

Evaluation (`zkconsumer.monitor.evaluator.evaluate_bridge_partition`): an unreadable
checkpoint or log end is ERR; no live bridge process is STOP; a batch in flight (an intent)
while ``end`` has not moved for a whole window is STALL (the write is stuck); otherwise OK.

Reads per poll: 2 + G_b (member directories) + T_b + P_b (target directories) + the
checkpoints (one per bridge group and 0.7 partition it writes).
"""

from __future__ import annotations

import re

from zkconsumer.errors import ZnodeDataError
from zkconsumer.monitor.model import GroupObs, MemberObs, PartitionObs
from zkconsumer.zk.bulk import BulkReader
from zkconsumer.zk.paths import (
    BRIDGE,
    BRIDGE_TARGETS,
    bridge_checkpoint_path,
    bridge_members_path,
    bridge_partition_path,
    parse_bridge_checkpoint,
)
from zkconsumer.zk.pipeline import PipelinedReader

__all__ = ["BRIDGE_PREFIX", "read_bridges"]

BRIDGE_PREFIX = "bridge:"


def read_bridges(zk: BulkReader | PipelinedReader, groups_re: re.Pattern[str] | None
                 ) -> tuple[list[GroupObs], set[tuple[str, str]]]:
    """Every bridge group (``--groups`` filters by the bridge's group name) and the 0.7
    partitions whose log ends the rows need."""
    names = [g for g in zk.children([BRIDGE])[BRIDGE] if g != BRIDGE_TARGETS.rsplit("/", 1)[1]
             and (groups_re is None or groups_re.search(g))]
    if not names:
        return [], set()
    members = zk.children([bridge_members_path(g) for g in names])
    topics = zk.children([BRIDGE_TARGETS])[BRIDGE_TARGETS]
    parts = zk.children([f"{BRIDGE_TARGETS}/{t}" for t in topics])
    writers = zk.children([bridge_partition_path(t, p) for t in topics
                           for p in parts[f"{BRIDGE_TARGETS}/{t}"]])
    wanted = [(g, t, p) for t in topics for p in parts[f"{BRIDGE_TARGETS}/{t}"]
              for g in writers[bridge_partition_path(t, p)] if g in names]
    nodes = zk.nodes([bridge_checkpoint_path(g, t, p) for g, t, p in wanted])
    rows: dict[str, list[PartitionObs]] = {g: [] for g in names}
    for g, t, p in wanted:
        path = bridge_checkpoint_path(g, t, p)
        node = nodes[path]
        if node is None:
            continue
        live = bool(members[bridge_members_path(g)])
        try:
            cp = parse_bridge_checkpoint(path, node.data)
        except ZnodeDataError as exc:
            rows[g].append(PartitionObs(t, p, None, live, None, None, node.mtime_ms, None,
                                        f"bridge checkpoint unreadable: {exc}"))
            continue
        intent = None if cp.intent is None else f"{cp.intent.owner}@{cp.intent.start}"
        rows[g].append(PartitionObs(t, p, intent, live, None, None if cp.end < 0 else cp.end,
                                    node.mtime_ms, None, None, None, dict(cp.sources)))
    out = [GroupObs(BRIDGE_PREFIX + g,
                    [MemberObs(m, "bridge process", {}) for m in members[bridge_members_path(g)]],
                    rows[g], [], [], kind="bridge") for g in names]
    return out, {(t, p) for _, t, p in wanted}
