"""The at-least-once engine's send and resend paths (mirror/engine.py) with a fake target.

The target here is a stand-in (a unit test of the engine's bookkeeping; the real targets are
tested against tansu and 0.7 dev brokers in tests/integration/mirror/); the loop guard is the
real `LoopGuard` reading a table in place of ZooKeeper, as in test_mirror_loopguard.py.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from zkconsumer.consumer.message import MessageBatch, PartitionState
from zkconsumer.mirror.config import MirrorConfig, TargetSpec
from zkconsumer.mirror.engine import Mirror
from zkconsumer.mirror.lanes import LaneState, LaneStatus
from zkconsumer.mirror.loopguard import LoopGuard
from zkconsumer.mirror.targets import DoneCallback, RunItem
from zkconsumer.zk.paths import BridgeCheckpoint


class FlakyTarget:
    """Fails the first ``failures`` runs (as a broker outage would), then records what it is
    sent, with the stream each run came with."""

    description = "fake://target"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.sent: list[bytes] = []
        self.streams: list[Hashable] = []
        self.resets = 0

    def open(self) -> None: ...
    def partition_count(self, topic: str) -> int:
        return 4

    def create_topic(self, topic: str, partitions: int, replication_factor: int) -> None: ...
    def hash_partition(self, data: bytes, n: int) -> int:
        return 0

    def send(self, topic: str, value: bytes, partition: int | None, key: bytes | None,
             on_done: DoneCallback, *, stream: Hashable = None) -> None:
        self.send_run(topic, [(value, partition, key)], on_done, stream=stream)

    def send_run(self, topic: str, items: Sequence[RunItem], on_done: DoneCallback, *,
                 stream: Hashable = None) -> None:
        if self.failures:
            self.failures -= 1
            on_done(ConnectionError("target down"))
            return
        self.sent.extend(value for value, _p, _k in items)
        self.streams.append(stream)
        on_done(None)

    def flush(self, timeout: float) -> bool:
        return True

    def reset(self) -> None:
        self.resets += 1

    def close(self, timeout: float = 5.0) -> None: ...


class Bridges:
    """What ZooKeeper would say about bridge checkpoints (see test_mirror_loopguard.py)."""

    def __init__(self, cps: dict[tuple[str, str], list[BridgeCheckpoint]]) -> None:
        self.cps = cps

    def bridged_partitions(self, topic: str) -> list[str]:
        return [p for t, p in self.cps if t == topic]

    def bridge_checkpoints(self, topic: str, partition: str) -> list[BridgeCheckpoint]:
        return self.cps.get((topic, partition), [])


class Group:
    """The few consumer calls these paths make (no ZooKeeper behind them)."""

    def __init__(self) -> None:
        self.acked: list[tuple[str, int]] = []

    def add_listener(self, listener: Any) -> None: ...
    def ack(self, message: Any) -> None:
        self.acked.append((message.topic, message.next_offset))


def _mirror(target: FlakyTarget) -> tuple[Mirror, Group]:
    config = MirrorConfig(target=TargetSpec.parse("kafka://127.0.0.1:9"), exactly_once=False,
                          retry_backoff_ms=1, retry_backoff_max_ms=1)
    group = Group()
    mirror = Mirror(config, group, target,  # type: ignore[arg-type]
                    source_partitions=lambda topic: ["0-0", "0-1"])
    return mirror, group


def _batch(state: PartitionState, offsets: range) -> MessageBatch:
    decoded = [(o, o + 10, b"m%d" % o) for o in offsets]
    return MessageBatch([(state, decoded, 0, len(decoded))])


def test_a_resent_run_still_leaves_out_what_a_bridge_wrote() -> None:
    # offsets 0..90 step 10; a bridge wrote [30, 60) into this 0.7 partition
    bridges = Bridges({("t", "0-0"): [BridgeCheckpoint(60, ranges=((30, 60),))]})
    target = FlakyTarget(failures=1)
    mirror, group = _mirror(target)
    mirror._guard = LoopGuard(bridges)
    state = PartitionState("t", 0, 0, "t-thread", 0, None, 1 << 20)
    mirror._lanes[state.key] = lane = LaneStatus("t/0-0")
    lane.move(LaneState.ACTIVE)
    mirror._send(_batch(state, range(0, 100, 10)))
    assert target.sent == [] and mirror._tracker.has_failures
    mirror._recover()
    assert target.resets == 1 and lane.state is LaneState.ACTIVE
    assert target.sent == [b"m%d" % o for o in (0, 10, 20, 60, 70, 80, 90)]
    assert mirror.stats.snapshot()["looped"] == 6  # three on the send, three on the resend
    mirror._ack()
    assert group.acked == [("t", 100)]  # bridged ones are acknowledged, not copied


def test_every_run_is_sent_with_its_source_partition_as_the_stream() -> None:
    target = FlakyTarget(failures=0)
    mirror, _group = _mirror(target)
    a = PartitionState("t", 0, 0, "x", 0, None, 1 << 20)
    b = PartitionState("t", 0, 1, "x", 0, None, 1 << 20)
    mirror._send(MessageBatch([(a, [(0, 10, b"a0")], 0, 1), (b, [(0, 10, b"b0")], 0, 1),
                               (a, [(10, 20, b"a1")], 0, 1)]))
    assert target.streams == [("t", "0-0"), ("t", "0-1"), ("t", "0-0")]
