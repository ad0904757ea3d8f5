"""No loops on the 0.7 side (mirror/loopguard.py), with a table standing in for ZooKeeper."""

from __future__ import annotations

from zkconsumer.mirror.loopguard import LoopGuard, inside
from zkconsumer.zk.paths import BridgeCheckpoint, BridgeIntent


class Tables:
    """What ZooKeeper would answer, and how often it was asked."""

    def __init__(self) -> None:
        self.cps: dict[tuple[str, str], list[BridgeCheckpoint]] = {}
        self.reads = 0

    def bridged_partitions(self, topic: str) -> list[str]:
        self.reads += 1
        return [p for t, p in self.cps if t == topic]

    def bridge_checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]:
        self.reads += 1
        return self.cps.get((topic, partition), [])


def test_no_bridge_costs_one_read_per_topic_per_poll() -> None:
    zk = Tables()
    guard = LoopGuard(zk)
    guard.new_poll()
    assert guard.ranges("t", "0-0", 100) == [] and guard.ranges("t", "0-1", 50) == []
    assert zk.reads == 1
    assert guard.ranges("t", "0-0", 99) == []  # verified already: no read at all
    guard.new_poll()
    guard.ranges("t", "0-0", 200)
    assert zk.reads == 2


def test_ranges_and_the_batch_in_flight_are_skipped() -> None:
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(300, ranges=((100, 300),),
                                             intent=BridgeIntent("m", 300, 50, {}))]
    guard = LoopGuard(zk)
    guard.new_poll()
    ranges = guard.ranges("t", "0-0", 320)
    assert ranges == [(100, 300), (300, 350)]
    assert [o for o in (0, 99, 100, 299, 300, 349, 350) if inside(ranges, o)] == [100, 299,
                                                                                   300, 349]


def test_new_data_past_what_was_verified_is_checked_again() -> None:
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(100, ranges=((0, 100),))]
    guard = LoopGuard(zk)
    guard.new_poll()
    assert guard.ranges("t", "0-0", 50) == [(0, 100)]
    # the bridge writes on; the next poll brings offsets past 50: read again, see it
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(200, ranges=((0, 200),))]
    guard.new_poll()
    assert guard.ranges("t", "0-0", 150) == [(0, 200)]
    # a rewind (rebalance) to old offsets uses what is known, without reading
    reads = zk.reads
    assert guard.ranges("t", "0-0", 20) == [(0, 200)] and zk.reads == reads
