"""No loops on the 0.7 side (mirror/loopguard.py), with a table standing in for ZooKeeper."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zkconsumer.errors import SessionExpiredError, ZnodeDataError, ZooKeeperAuthError
from zkconsumer.mirror.config import MirrorConfig, TargetSpec
from zkconsumer.mirror.loopguard import LoopGuard, inside
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.runtime import Runtime, Stopped
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


class Clock:
    """A clock that only moves when the guard waits; ``on_wait`` may change the tables."""

    def __init__(self, on_wait: Callable[[int], None] = lambda n: None,
                 stop_after: int | None = None) -> None:
        self.now = 0.0
        self.waits = 0
        self.on_wait = on_wait
        self.stop_after = stop_after

    def wait(self, seconds: float) -> bool:
        self.now += seconds
        self.waits += 1
        self.on_wait(self.waits)
        return self.stop_after is not None and self.waits >= self.stop_after


def guard_with(zk: Tables, clock: Clock, limit: float = 10.0) -> LoopGuard:
    return LoopGuard(zk, wait_limit=limit, wait=clock.wait, clock=lambda: clock.now)


def test_ranges_and_the_batch_in_flight_are_skipped() -> None:
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(300, ranges=((100, 300),),
                                             intent=BridgeIntent("m", 300, 50, {}))]
    clock = Clock()
    guard = guard_with(zk, clock, limit=0.5)
    guard.new_poll()
    ranges = guard.ranges("t", "0-0", 320)  # its bridge never resolves it: used as it stands
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


def test_a_batch_in_flight_is_waited_for_and_recorded_where_it_landed() -> None:
    """Another producer's 30 bytes landed at 300 before the bridge's 50-byte batch, which the
    bridge read back at 330.  The intent said 300-350: trusting it would skip the other
    producer's messages (300-329) and copy the bridged 350-379 back."""
    zk = Tables()
    key = ("t", "0-0")
    zk.cps[key] = [BridgeCheckpoint(300, ranges=((0, 300),),
                                    intent=BridgeIntent("m", 300, 50, {}))]

    def resolve(n: int) -> None:
        if n == 3:  # the bridge's read-back found the batch at 330
            zk.cps[key] = [BridgeCheckpoint(380, ranges=((0, 300), (330, 380)), shared=True)]

    clock = Clock(resolve)
    guard = guard_with(zk, clock)
    guard.new_poll()
    ranges = guard.ranges("t", "0-0", 379)
    assert ranges == [(0, 300), (330, 380)]
    assert [o for o in (299, 300, 329, 330, 379) if inside(ranges, o)] == [299, 330, 379]
    assert guard.waits == 3 and clock.now < 0.1


def test_an_intent_the_poll_does_not_reach_costs_no_wait() -> None:
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(300, ranges=((0, 300),),
                                             intent=BridgeIntent("m", 300, 50, {}))]
    clock = Clock()
    guard = guard_with(zk, clock)
    guard.new_poll()
    assert guard.ranges("t", "0-0", 299) == [(0, 300), (300, 350)]
    assert clock.waits == 0


def test_an_intent_never_resolved_is_waited_for_once(caplog: pytest.LogCaptureFixture) -> None:
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(300, ranges=((0, 300),),
                                             intent=BridgeIntent("dead", 300, 50, {}))]
    clock = Clock()
    guard = guard_with(zk, clock, limit=2.0)
    guard.new_poll()
    assert guard.ranges("t", "0-0", 320) == [(0, 300), (300, 350)]
    assert 2.0 <= clock.now < 2.2
    assert "was not resolved within 2.0s" in caplog.text
    waits = clock.waits
    guard.new_poll()
    assert guard.ranges("t", "0-0", 349) == [(0, 300), (300, 350)]
    assert clock.waits == waits  # the same intent is not waited for again


def test_a_stop_while_waiting_ends_the_poll() -> None:
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(300, intent=BridgeIntent("m", 300, 50, {}))]
    guard = guard_with(zk, Clock(stop_after=2))
    guard.new_poll()
    with pytest.raises(Stopped):
        guard.ranges("t", "0-0", 310)


def test_an_unmarked_mirror_is_warned_once_per_partition_a_bridge_writes(
        caplog: pytest.LogCaptureFixture) -> None:
    """An at-least-once ``kafka://`` mirror writes no provenance headers, so a bridge reading
    its target would copy its records back: it is told so once a bridge shows up."""
    zk = Tables()
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(120, ranges=((0, 120),))]
    for marked, warnings in ((True, 0), (False, 1)):
        caplog.clear()
        guard = LoopGuard(zk, marked=marked)
        for _ in range(3):
            guard.new_poll()
            assert guard.ranges("t", "0-0", 150) == [(0, 120)]
            assert guard.ranges("t", "0-1", 150) == []
        assert sum("writes no provenance headers" in r.message for r in caplog.records
                   if r.levelname == "WARNING") == warnings


class Flaky(Tables):
    """Tables behind a ZooKeeper that fails the first ``failures`` reads with ``error``."""

    def __init__(self, failures: int, error: Exception) -> None:
        super().__init__()
        self.failures = failures
        self.error = error

    def bridged_partitions(self, topic: str) -> list[str]:
        if self.failures:
            self.failures -= 1
            raise self.error
        return super().bridged_partitions(topic)


def _runtime() -> Runtime:
    config = MirrorConfig(target=TargetSpec.parse("kafka://h:1"), retry_backoff_ms=1,
                          retry_backoff_max_ms=2)
    return Runtime(config, MirrorStats(), "test")


def test_an_expired_session_is_waited_out_not_fatal() -> None:
    """A mirror paused past its session timeout read the guard on the expired session and
    exited (soak seed 76): with the engines' `Runtime.zookeeper_read` the read is retried
    until the session is back, and answers as usual."""
    zk = Flaky(2, SessionExpiredError("get_children /zkconsumer/bridge/targets/t: expired"))
    zk.cps[("t", "0-0")] = [BridgeCheckpoint(500, ranges=((100, 500),))]
    runtime = _runtime()
    guard = LoopGuard(zk, read=runtime.zookeeper_read)
    guard.new_poll()
    assert guard.ranges("t", "0-0", 1000) == [(100, 500)]
    assert runtime.stats.snapshot()["retries"] == 2


@pytest.mark.parametrize("error", [
    ZnodeDataError("garbage", path="/zkconsumer/bridge/targets/t", data=b"x"),
    ZooKeeperAuthError("NoAuth"),
    ValueError("a bug, not ZooKeeper"),
])
def test_what_waiting_cannot_cure_stays_final(error: Exception) -> None:
    zk = Flaky(1, error)
    runtime = _runtime()
    guard = LoopGuard(zk, read=runtime.zookeeper_read)
    guard.new_poll()
    with pytest.raises(type(error)):
        guard.ranges("t", "0-0", 1000)
    assert runtime.stats.snapshot()["retries"] == 0
