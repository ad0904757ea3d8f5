"""The bridge's checkpoint znode format (zk/paths.py): round trip, landing, ranges, garbage."""

from __future__ import annotations

import pytest

from zkconsumer.errors import ZnodeDataError
from zkconsumer.zk.paths import (
    BRIDGE_MAX_RANGES,
    BridgeCheckpoint,
    BridgeIntent,
    bridge_checkpoint_path,
    bridge_member_path,
    parse_bridge_checkpoint,
)


def test_paths() -> None:
    assert bridge_checkpoint_path("g", "t", "1-0") == "/zkconsumer/bridge/targets/t/1-0/g"
    assert bridge_member_path("g", "m1") == "/zkconsumer/bridge/g/members/m1"


def test_round_trip_with_and_without_intent() -> None:
    intent = BridgeIntent("m", 10, 5, {"src/0": 7})
    for cp in (BridgeCheckpoint(), BridgeCheckpoint(10, {"src/0": 3}, ((0, 10),), True, intent)):
        assert parse_bridge_checkpoint("/p", cp.encode()) == cp


def test_landing_merges_contiguous_ranges_and_sources() -> None:
    cp = BridgeCheckpoint(10, {"a/0": 3, "b/1": 9}, ((0, 10),))
    landed = cp.landed(BridgeIntent("m", 10, 5, {"a/0": 6}))
    assert landed == BridgeCheckpoint(15, {"a/0": 6, "b/1": 9}, ((0, 15),))
    apart = cp.landed(BridgeIntent("m", 12, 3, {}))  # another producer wrote 10..12
    assert apart.ranges == ((0, 10), (12, 15))
    assert apart.covers(12) and not apart.covers(11) and not apart.covers(15)


def test_ranges_are_bounded() -> None:
    cp = BridgeCheckpoint(0)
    for _ in range(BRIDGE_MAX_RANGES + 5):
        cp = cp.landed(BridgeIntent("m", cp.end + 1, 1, {}))  # never contiguous
    assert len(cp.ranges) == BRIDGE_MAX_RANGES and cp.ranges[-1][1] == cp.end


@pytest.mark.parametrize("data", [None, b"", b"[]", b'{"end": "x"}', b"{not json"])
def test_garbage_raises_znode_data_error(data: bytes | None) -> None:
    with pytest.raises(ZnodeDataError):
        parse_bridge_checkpoint("/p", data)
