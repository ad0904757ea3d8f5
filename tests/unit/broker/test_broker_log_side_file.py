"""Recovery keeps the bytes it cuts (issue 11).

0.7.2's recovery truncates the last segment at the first bad entry, destroying every valid
message behind a mid-file corruption.  The dev broker still ends the log there (what a 0.7
client sees is unchanged) but first copies the cut bytes to
``<segment>.kafka.truncated-<position>``, which no log loader or ``zkconsumer logdir`` reads.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from zkconsumer.broker.log import LogSettings, PartitionLog
from zkconsumer.client.logdir import discover
from zkconsumer.protocol import encode_message
from zkconsumer.protocol.logformat import segment_name

MSG = encode_message(b"0123456789")  # 20 bytes
SETTINGS = LogSettings(segment_size=1 << 20, flush_interval=1, roll_ms=1 << 40)


def _corrupt(msg: bytes) -> bytes:
    return msg[:-1] + bytes([msg[-1] ^ 0xFF])  # CRC no longer matches


def test_mid_file_corruption_moves_the_tail_to_a_side_file(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    tail = _corrupt(MSG) + MSG * 5  # one bad message, then five valid ones
    (d / segment_name(0)).write_bytes(MSG * 3 + tail)
    with caplog.at_level(logging.WARNING, logger="zkconsumer.broker.log"):
        plog = PartitionLog(d, "t", 0, SETTINGS)
    try:
        assert plog.high_water_mark == 60  # 0.7's visible behaviour: the log ends there
    finally:
        plog.close()
    assert (d / segment_name(0)).read_bytes() == MSG * 3
    side = d / f"{segment_name(0)}.truncated-60"
    assert side.read_bytes() == tail  # nothing destroyed
    assert str(side) in caplog.text and "truncated 120 bytes" in caplog.text
    # neither the broker's loader nor `zkconsumer logdir` takes it for a segment
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="zkconsumer.broker.log"):
        again = PartitionLog(d, "t", 0, SETTINGS)
    assert [s.path.name for s in again.segments] == [segment_name(0)]
    again.close()
    assert caplog.text == ""
    [part] = discover(str(tmp_path))
    assert [Path(s.path).name for s in part.segments] == [segment_name(0)]


def test_a_second_cut_at_the_same_position_gets_its_own_side_file(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    seg = d / segment_name(0)
    seg.write_bytes(MSG + b"\x00\x00")
    PartitionLog(d, "t", 0, SETTINGS).close()
    seg.write_bytes(MSG + b"\x00\x01\x02")
    PartitionLog(d, "t", 0, SETTINGS).close()
    assert (d / f"{seg.name}.truncated-20").read_bytes() == b"\x00\x00"
    assert (d / f"{seg.name}.truncated-20.1").read_bytes() == b"\x00\x01\x02"


def test_a_clean_log_makes_no_side_file(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    d.mkdir()
    (d / segment_name(0)).write_bytes(MSG * 2)
    PartitionLog(d, "t", 0, SETTINGS).close()
    assert sorted(p.name for p in d.iterdir()) == [segment_name(0)]
