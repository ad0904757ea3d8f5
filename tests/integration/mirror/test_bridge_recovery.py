"""The bridge's 0.7 checkpoints after a crash between intent and resolve (bridge_target.py).

A member that died after writing its intent leaves one of three situations, each decided by
the next member from the broker's flushed end: the batch landed (merged: its source offsets
count as written), it did not (dropped: written again), or another producer wrote the
partition meanwhile (not exactly-once there: marked shared, the batch written again).
Real ZooKeeper and a real 0.7 dev broker; the dead member is a member id with no znode.
"""

from __future__ import annotations

import dataclasses

import pytest
from bridge_helpers import read_07, register_topic
from fixtures.waiting import wait_until

from zkconsumer.client import BrokerConnection
from zkconsumer.client import produce as raw_produce
from zkconsumer.mirror.bridge_target import Kafka07Sink
from zkconsumer.mirror.config import MirrorConfig, TargetSpec
from zkconsumer.mirror.metrics import MirrorStats
from zkconsumer.mirror.runtime import Runtime
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.paths import BridgeIntent, bridge_checkpoint_path, parse_bridge_checkpoint
from zkconsumer.zk.session import ZkSession


@pytest.fixture
def sinks(zk_connect, dev_broker):
    broker = dev_broker(num_partitions=1)
    register_topic([broker], "t07", 1)
    wait_until(lambda: read_07(zk_connect, "t07"), timeout=10, what="t07 registered")
    opened: list[Kafka07Sink] = []

    def make() -> Kafka07Sink:
        config = MirrorConfig(target=TargetSpec.parse(f"kafka07://{zk_connect}"))
        sink = Kafka07Sink(zk_connect, {}, "g", Runtime(config, MirrorStats(), "test"),
                           flush_wait=1.0)
        sink.open()
        opened.append(sink)
        return sink

    yield make, broker
    for sink in opened:
        sink.close()


def _leave_intent(zk_connect: str, data: bytes, sources: dict[str, int]) -> None:
    """What a member killed right after step 1 (intent) leaves in ZooKeeper."""
    path = bridge_checkpoint_path("g", "t07", "0-0")
    with ZkSession(zk_connect) as s:
        node = s.get_node(path)
        assert node is not None
        cp = parse_bridge_checkpoint(path, node.data)
        intent = BridgeIntent("dead-member", cp.end, len(data), sources)
        assert s.set_if_version(path, dataclasses.replace(cp, intent=intent).encode(),
                                node.version) is not None


def test_a_dead_members_batch_that_landed_is_merged(zk_connect, sinks) -> None:
    make, broker = sinks
    first = make()
    first.write("t07", 0, first.encode("t07", [b"a", b"b"]), {"src/0": 2})
    data = first.encode("t07", [b"c", b"d", b"e"])
    _leave_intent(zk_connect, data, {"src/0": 5})
    with BrokerConnection(broker.host, broker.port) as conn:  # step 2 happened, step 3 not
        raw_produce(conn, "t07", 0, data, confirm=True)
    cp = make().checkpoint("t07", 0)
    assert cp.intent is None and cp.sources == {"src/0": 5} and not cp.shared
    assert cp.end == sum(len(first.encode("t07", v)) for v in ([b"a", b"b"], [b"c", b"d", b"e"]))
    assert read_07(zk_connect, "t07")["0-0"] == [b"a", b"b", b"c", b"d", b"e"]


def test_a_dead_members_batch_that_did_not_land_is_written_again(zk_connect, sinks) -> None:
    make, _broker = sinks
    first = make()
    first.write("t07", 0, first.encode("t07", [b"a"]), {"src/0": 1})
    data = first.encode("t07", [b"b", b"c"])
    _leave_intent(zk_connect, data, {"src/0": 3})  # killed before the produce
    second = make()
    cp = second.checkpoint("t07", 0)
    assert cp.intent is None and cp.sources == {"src/0": 1}
    second.write("t07", 0, data, {"src/0": 3})  # the retry: written once
    assert read_07(zk_connect, "t07")["0-0"] == [b"a", b"b", b"c"]
    assert second.checkpoint("t07", 0).sources == {"src/0": 3}


def test_another_producer_makes_the_partition_shared(zk_connect, sinks) -> None:
    make, broker = sinks
    first = make()
    first.write("t07", 0, first.encode("t07", [b"a"]), {"src/0": 1})
    _leave_intent(zk_connect, first.encode("t07", [b"b", b"c"]), {"src/0": 3})
    with BrokerConnection(broker.host, broker.port) as conn:  # someone else's message
        raw_produce(conn, "t07", 0, encode_message_set([b"x"]), confirm=True)
    cp = make().checkpoint("t07", 0)
    assert cp.shared and cp.intent is None
    assert cp.sources == {"src/0": 1}  # not counted as landed: written again (a duplicate
    #                                    at worst, never a loss)


def test_a_retried_write_that_landed_is_not_written_twice(zk_connect, sinks) -> None:
    make, _broker = sinks
    sink = make()
    data = sink.encode("t07", [b"a", b"b"])
    sink.write("t07", 0, data, {"src/0": 2})
    sink.write("t07", 0, data, {"src/0": 2})  # e.g. the answer was lost and it is retried
    assert read_07(zk_connect, "t07")["0-0"] == [b"a", b"b"]


def test_two_members_take_turns_on_one_partition(zk_connect, sinks) -> None:
    """Each member's view of the checkpoint goes stale when the other writes; a stale view
    never makes a member take the other's batch for another producer's, nor write over it."""
    make, _broker = sinks
    first, second = make(), make()
    first.write("t07", 0, first.encode("t07", [b"a"]), {"src/0": 1})
    second.write("t07", 0, second.encode("t07", [b"b", b"c"]), {"src/1": 2})
    first.write("t07", 0, first.encode("t07", [b"d"]), {"src/0": 2})  # its view was stale
    second.write("t07", 0, second.encode("t07", [b"e"]), {"src/1": 3})
    assert read_07(zk_connect, "t07")["0-0"] == [b"a", b"b", b"c", b"d", b"e"]
    cp = make().checkpoint("t07", 0)
    assert cp.sources == {"src/0": 2, "src/1": 3} and not cp.shared and cp.intent is None
    assert cp.ranges == ((0, cp.end),)


def test_a_batch_after_another_producers_is_recorded_where_it_landed(zk_connect,
                                                                      sinks) -> None:
    """The forward mirror skips exactly the recorded ranges (loopguard.py): a range left at
    the end the sink knew, before another producer's sets, would skip that producer's
    messages and let the bridged ones be mirrored back."""
    make, broker = sinks
    sink = make()
    a = sink.encode("t07", [b"a"])
    sink.write("t07", 0, a, {"src/0": 1})
    x = encode_message_set([b"x", b"y"])
    with BrokerConnection(broker.host, broker.port) as conn:  # after the sink's last check
        raw_produce(conn, "t07", 0, x, confirm=True)
    b = sink.encode("t07", [b"b", b"c"])
    sink.write("t07", 0, b, {"src/0": 3})
    assert read_07(zk_connect, "t07")["0-0"] == [b"a", b"x", b"y", b"b", b"c"]
    cp = make().checkpoint("t07", 0)
    start = len(a) + len(x)
    assert cp.ranges == ((0, len(a)), (start, start + len(b)))
    assert cp.shared and cp.end == start + len(b) and cp.sources == {"src/0": 3}


@pytest.mark.parametrize("bound", [512 * 1024, 1], ids=["one-multi", "past-the-bound"])
def test_a_rounds_checkpoints_move_in_one_multi_or_one_by_one_past_its_bound(
        zk_connect, dev_broker, monkeypatch, bound: int) -> None:
    """Several 0.7 partitions on one broker: their intents go in one ZooKeeper multi and
    their resolves in another -- or, past the size bound (jute.maxbuffer), one by one; the
    checkpoints and the data are the same either way."""
    import zkconsumer.mirror.bridge_target as bridge_target

    calls: list[int] = []
    real = bridge_target.set_if_versions

    def counted(session, writes):  # type: ignore[no-untyped-def]
        calls.append(len(writes))
        return real(session, writes)

    monkeypatch.setattr(bridge_target, "set_if_versions", counted)
    monkeypatch.setattr(bridge_target, "_MULTI_MAX_BYTES", bound)
    broker = dev_broker(num_partitions=2)
    register_topic([broker], "m07", 2)
    wait_until(lambda: len(read_07(zk_connect, "m07")) == 2, timeout=10, what="m07 registered")
    config = MirrorConfig(target=TargetSpec.parse(f"kafka07://{zk_connect}"))
    sink = Kafka07Sink(zk_connect, {}, "g", Runtime(config, MirrorStats(), "test"),
                       flush_wait=5.0)
    sink.open()
    try:
        for round_ in range(2):
            sets = {i: encode_message_set([b"r%d-p%d-%d" % (round_, i, k) for k in range(3)])
                    for i in range(2)}
            sink.write_batches([("m07", i, sets[i], {f"src/{i}": 3 * (round_ + 1)})
                                for i in range(2)])
        for i in range(2):
            cp = sink.checkpoint("m07", i)
            assert cp.sources == {f"src/{i}": 6} and cp.intent is None
            assert cp.ranges == ((0, cp.end),)
    finally:
        sink.close()
    assert calls == ([2, 2, 2, 2] if bound > 1 else [])
    got = read_07(zk_connect, "m07")
    assert sorted(v for values in got.values() for v in values) == sorted(
        b"r%d-p%d-%d" % (r, i, k) for r in range(2) for i in range(2) for k in range(3))
