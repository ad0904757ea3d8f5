"""``zkconsumer export --log-dir`` over corrupt segments: one-line failure, or --skip-corrupt.

What the executors step over (a corrupt message, a torn tail) must reach the command's summary
and the resume record, not only the executors' stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zkconsumer import cli
from zkconsumer.protocol import Compression, encode_message_set
from zkconsumer.protocol.logformat import segment_name

pytestmark = pytest.mark.slow

PLAIN = encode_message_set([b"o%d" % i for i in range(50)])  # o0..o9: 12-byte entries
GZIP = encode_message_set([b"z%d" % i for i in range(20)], compression=Compression.GZIP)
OTHER = encode_message_set([b"p1-%d" % i for i in range(10)])
TORN = encode_message_set([b"torn"])[:-2]


def _write_log(root: Path) -> tuple[Path, Path]:
    """orders-0: a plain segment whose 11th message (position 120) is corrupt, then a gzip
    segment; orders-1: one segment ending in a torn tail.  Returns the two damaged files."""
    bad = bytearray(PLAIN)
    bad[120 + 10] ^= 0x01  # the first payload byte of the message at position 120
    (root / "orders-0").mkdir(parents=True)
    (root / "orders-0" / segment_name(0)).write_bytes(bytes(bad))
    (root / "orders-0" / segment_name(len(PLAIN))).write_bytes(GZIP)
    (root / "orders-1").mkdir()
    (root / "orders-1" / segment_name(0)).write_bytes(OTHER + TORN)
    return root / "orders-0" / segment_name(0), root / "orders-1" / segment_name(0)


def test_corrupt_segment_fails_in_one_line_or_is_skipped_and_reported(
        spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corrupt, torn = _write_log(tmp_path / "logs")
    out = tmp_path / "out"
    argv = ["export", "--log-dir", str(tmp_path / "logs"), "--to", str(out), "--format", "json"]

    capsys.readouterr()
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("zkconsumer export: error: corrupt log segment: CorruptMessageError")
    assert f"in {corrupt} at file position 120" in err and "--skip-corrupt" in err
    assert not (out / "_zkconsumer_offsets.json").exists()

    assert cli.main([*argv, "--skip-corrupt"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("exported 40 rows ")  # 10 before the bad byte + 20 + 10
    assert lines[1] == "skipped 2 ranges, 532 log bytes not exported:"
    assert lines[2].startswith(f"  corrupt in {corrupt} at position 120 (orders/0 offset 120): "
                               f"{len(PLAIN) - 120} bytes not exported; CRC mismatch")
    assert lines[3].startswith(f"  torn-tail in {torn} at position {len(OTHER)} (orders/1 "
                               f"offset {len(OTHER)}): {len(TORN)} bytes not exported; ")
    assert len(lines) == 4
    record = json.loads((out / "_zkconsumer_offsets.json").read_text())
    # orders-0 goes on after the skipped bytes (the gzip segment was read); orders-1 stops
    # before its torn tail
    assert record["offsets"] == {"orders": {"0": len(PLAIN) + len(GZIP), "1": len(OTHER)}}
    assert [(s["kind"], s["path"], s["position"], s["bytes"]) for s in record["skipped"]] == [
        ("corrupt", str(corrupt), 120, len(PLAIN) - 120),
        ("torn-tail", str(torn), len(OTHER), len(TORN))]
    values = [json.loads(line)["value"] for f in out.glob("part-*.json")
              for line in f.read_text().splitlines()]
    assert len(values) == 40


def test_skip_corrupt_needs_a_log_dir(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", "--zk", "127.0.0.1:1", "--topic", "t", "--to", "x",
                     "--skip-corrupt"]) == 2
    assert "--skip-corrupt applies to --log-dir" in capsys.readouterr().err


def test_a_missing_segment_read_around_is_listed_as_a_gap(spark: Any, tmp_path: Path) -> None:
    from zkconsumer.spark.export import run_export

    logs = tmp_path / "logs"
    (logs / "orders-0").mkdir(parents=True)
    for start, data in ((0, PLAIN), (len(PLAIN) + len(GZIP), OTHER)):  # the gzip file is gone
        (logs / "orders-0" / segment_name(start)).write_bytes(data)
    result = run_export({"logDir": str(logs), "failOnDataLoss": "false"},
                        str(tmp_path / "out"), spark=spark)
    assert result.rows == 50 + 10
    assert [(s.kind, s.path, s.offset, s.bytes) for s in result.skipped] == [
        ("gap", str(logs / "orders-0" / segment_name(len(PLAIN) + len(GZIP))), len(PLAIN),
         len(GZIP))]
    assert result.end == {"orders": {"0": len(PLAIN) + len(GZIP) + len(OTHER)}}
