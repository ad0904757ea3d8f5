"""The bridge's routing of a poll into a round (mirror/bridge.py ``_route_round``) and the
merging of rounds (``_Round.merged``): what each 0.7 partition gets, which source positions
move, what is skipped -- on real confluent-kafka ``Message`` objects, no broker."""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck

from zkconsumer.mirror.bridge import Bridge, SourceSpec, _Lane
from zkconsumer.mirror.checkpoints import HEADER_SOURCE
from zkconsumer.mirror.config import MirrorConfig, Partitioning, TargetSpec
from zkconsumer.mirror.lanes import LaneState
from zkconsumer.protocol import encode_message_set


def _bridge(partitioning: Partitioning = Partitioning.PRESERVE, *, n07: int = 2,
            skip: dict[int, list[int]] | None = None, round_bytes: int = 32 << 20) -> Bridge:
    bridge = Bridge(MirrorConfig(target=TargetSpec.parse("kafka07://127.0.0.1:1"),
                                 topic_map={"t": "t07"}, partitioning=partitioning,
                                 bridge_round_bytes=round_bytes),
                    SourceSpec(("127.0.0.1:1",), "g", ("t",)))
    for p in range(2):
        lane = _Lane("t", p, "t07")
        lane.skip = (skip or {}).get(p, [-1] * n07)
        if partitioning is Partitioning.PRESERVE:
            lane.fixed = p % n07
        lane.status.move(LaneState.ACTIVE, "test")
        bridge.lanes[("t", p)] = lane
    return bridge


def _m(p: int, o: int, value: bytes, headers: Any = None) -> ck.Message:
    return ck.Message(topic="t", partition=p, offset=o, value=value, headers=headers)


def test_interleaved_runs_land_in_order_with_their_positions() -> None:
    bridge = _bridge()
    records = [_m(0, 10, b"a10"), _m(0, 11, b"a11"), _m(1, 5, b"b5"), _m(0, 12, b"a12"),
               _m(1, 6, b"b6")]
    r = bridge._route_round(records)
    assert r is not None
    assert r.batches[("t07", 0)].parts == [encode_message_set([b"a10", b"a11", b"a12"])]
    assert r.batches[("t07", 1)].parts == [encode_message_set([b"b5", b"b6"])]
    assert r.batches[("t07", 0)].sources == {"t/0": 13}
    assert r.batches[("t07", 1)].sources == {"t/1": 6 + 1}
    assert {lane.source: done for lane, done in r.moved.items()} == {"t/0": 13, "t/1": 7}
    assert (r.batches[("t07", 0)].count, r.batches[("t07", 0)].size) == (3, 9)


def test_records_in_07_already_and_looped_ones_move_positions_but_are_not_written() -> None:
    bridge = _bridge(skip={0: [12, -1], 1: [-1, -1]})
    records = [_m(0, 10, b"a10"), _m(0, 11, b"a11"), _m(0, 12, b"a12"),
               _m(1, 5, b"b5", [(HEADER_SOURCE, b"t/0-0")]), _m(0, 13, b"a13", [("x", b"y")])]
    [r] = bridge._rounds(records)
    assert r.batches[("t07", 0)].parts == [encode_message_set([b"a12", b"a13"])]
    assert ("t07", 1) not in r.batches  # its only record came from 0.7
    assert {lane.source: done for lane, done in r.moved.items()} == {"t/0": 14, "t/1": 6}
    assert bridge.stats.snapshot()["looped"] == 1 and bridge.stats.snapshot()["skipped"] == 2


def test_a_poll_past_the_round_bound_is_cut_into_rounds_that_fit() -> None:
    """Each round is one produce request per 0.7 partition: a poll whose records pass
    ``mirror.bridge.round.bytes`` becomes several rounds, in order, each within the bound (or
    one record), and what its routing skipped is counted once."""
    bridge = _bridge(skip={0: [11, -1], 1: [-1, -1]}, round_bytes=120)
    records = [_m(0, 10 + i, bytes([65 + i]) * 50) for i in range(5)] + [
        _m(1, 1, b"b" * 200), _m(1, 2, b"c", [(HEADER_SOURCE, b"t/0-0")])]
    rounds = bridge._rounds(records)
    assert all(r.nbytes <= 120 or sum(b.count for b in r.batches.values()) == 1
               for r in rounds)
    assert len(rounds) > 2
    written = [p for r in rounds for b in r.batches.values() for p in b.parts]
    assert b"".join(written) == (encode_message_set([bytes([65 + i]) * 50 for i in range(1, 5)])
                                 + encode_message_set([b"b" * 200]))
    assert {lane.source: done for lane, done in rounds[-1].moved.items()} == {"t/1": 3}
    assert bridge.stats.snapshot()["looped"] == 1 and bridge.stats.snapshot()["skipped"] == 1


def test_a_poll_of_records_all_in_07_already_writes_nothing_but_moves() -> None:
    bridge = _bridge(skip={0: [99, -1], 1: [-1, -1]})
    r = bridge._route_round([_m(0, 10, b"a10"), _m(0, 11, b"a11")])
    assert r is not None and r.batches == {}
    assert {lane.source: done for lane, done in r.moved.items()} == {"t/0": 12}


def test_hash_routing_keeps_a_key_on_one_07_partition() -> None:
    bridge = _bridge(Partitioning.HASH)
    records: list[Any] = [ck.Message(topic="t", partition=p, offset=o, key=b"k%d" % (o % 3),
                                     value=b"v%d" % o) for p in range(2) for o in range(12)]
    r = bridge._route_round(records)
    assert r is not None
    seen: dict[bytes, set[int]] = {}
    for m in records:
        index = bridge._route(bridge.lanes[("t", m.partition())], m, m.value())
        seen.setdefault(m.key(), set()).add(index)
    assert all(len(indexes) == 1 for indexes in seen.values())
    assert sum(b.count for b in r.batches.values()) == 24


def test_merged_rounds_write_as_both_in_order() -> None:
    bridge = _bridge()
    first = bridge._route_round([_m(0, 1, b"a1"), _m(1, 1, b"b1")])
    later = bridge._route_round([_m(0, 2, b"a2")])
    assert first is not None and later is not None
    merged = first.merged(later, limit=1 << 20)
    assert merged is not None
    assert b"".join(merged.batches[("t07", 0)].parts) == (
        encode_message_set([b"a1"]) + encode_message_set([b"a2"]))
    assert merged.batches[("t07", 0)].sources == {"t/0": 3}
    assert {lane.source: done for lane, done in merged.moved.items()} == {"t/0": 3, "t/1": 2}
    assert merged.merged(bridge._route_round([_m(0, 3, b"a3")]) or merged, limit=1) is None
