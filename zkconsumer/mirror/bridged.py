"""Which records *written on the target* a 0.7 group has already had through a bridge.

Once producers write to the modern cluster, a bridge (``zkconsumer mirror --from kafka://``,
`zkconsumer.mirror.bridge`) copies their records into the 0.7 topics, and the 0.7 groups
that have not moved read them there.  Those records carry no provenance headers (they were
written on the target), so `zkconsumer.mirror.translate` needs the bridge's own account of
what it wrote: its checkpoint per 0.7 partition in ZooKeeper (`zkconsumer.zk.paths`,
``BridgeCheckpoint``): ``end`` (the byte offset after its last confirmed batch), ``ranges``
(the byte ranges it wrote) and ``sources`` (per source partition ``"topic/p"``, the next
source offset whose record routed here is not yet written).

For a 0.7 group G07 and one 0.7 partition X written by a bridge:

* G07 at or past the bridge's ``end``: G07 had every record the bridge wrote into X, so a
  record of source partition ``T/p`` routed to X below ``sources["T/p"]`` is **consumed**;
* G07 at or before the bridge's first written byte: it had none of them;
* in between: G07 stopped inside what the bridge wrote, and no per-record map says where --
  `BridgedView.refusals` names the partition (let the group consume to the end first).

`BridgedView.position` is, per source partition, the offset below which every record written
on the target was had by G07: the minimum over the 0.7 partitions it routes to (with ``hash``
and ``round-robin`` one source partition feeds several; records between the minimum and the
others' positions come again, never skipped).  Invariant: read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkconsumer.zk.paths import BridgeCheckpoint, bridge_checkpoint_path, bridge_partition_path
from zkconsumer.zk.paths import parse_bridge_checkpoint as parse_checkpoint
from zkconsumer.zk.registry import read_partition_names
from zkconsumer.zk.session import ZkSession

__all__ = ["BridgedView", "bridge_checkpoints", "bridged_view"]


@dataclass
class BridgedView:
    """What the bridges wrote into a 0.7 group's topics, as far as the group has read it."""

    positions: dict[str, int] = field(default_factory=dict)  # "T/p" -> next not had
    starts: dict[tuple[str, str], int] = field(default_factory=dict)  # (S, "B-P") -> byte
    refusals: list[str] = field(default_factory=list)

    def position(self, topic: str, partition: int) -> int:
        """Records of ``topic/partition`` written on the target below this were had."""
        return self.positions.get(f"{topic}/{partition}", 0)


def bridge_checkpoints(session: ZkSession, topic: str
                       ) -> dict[str, list[tuple[str, BridgeCheckpoint]]]:
    """``{"B-P": [(bridge group, checkpoint), ...]}`` of the 0.7 partitions of ``topic`` a
    bridge has written into (checkpoints with nothing written are left out)."""
    out: dict[str, list[tuple[str, BridgeCheckpoint]]] = {}
    for pname in read_partition_names(session, topic):
        parent = bridge_partition_path(topic, pname)
        if not session.exists(parent):
            continue
        for bridge in sorted(session.get_children(parent)):
            path = bridge_checkpoint_path(bridge, topic, pname)
            cp = parse_checkpoint(path, session.get(path))
            if cp.ranges and cp.end >= 0:
                out.setdefault(pname, []).append((bridge, cp))
    return out


def bridged_view(session: ZkSession, group07: str, topics: Iterable[str],
                 committed: Mapping[str, Mapping[str, int]]) -> BridgedView:
    """Read every bridge checkpoint of ``topics``' 0.7 partitions (see module docstring)."""
    view = BridgedView()
    for topic in sorted(set(topics)):
        for pname, written in bridge_checkpoints(session, topic).items():
            at = committed.get(topic, {}).get(pname, -1)
            for bridge, cp in written:
                first = cp.ranges[0][0]
                view.starts[(topic, pname)] = min(first, view.starts.get((topic, pname), first))
                had = at >= cp.end
                if not had and at > first:
                    view.refusals.append(
                        f"{topic}/{pname}: bridge {bridge} wrote bytes {first}-{cp.end} and "
                        f"{group07} stopped inside them, at {at}: let it consume to the end "
                        "of the partition, then translate")
                for source, offset in cp.sources.items():
                    mine = offset if had else 0
                    view.positions[source] = min(mine, view.positions.get(source, mine))
    return view
