"""``zkconsumer logdir dump``: summary and message output over a log directory on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zkconsumer import cli
from zkconsumer.protocol import Compression, encode_message_set
from zkconsumer.protocol.logformat import segment_name


def _log_dir(root: Path) -> Path:
    seg0 = encode_message_set([b"one", b"two"])
    seg1 = encode_message_set([b"three", b"\xff\xfe"], compression=Compression.GZIP)
    d = root / "my-topic-0"
    d.mkdir()
    (d / segment_name(0)).write_bytes(seg0)
    (d / segment_name(len(seg0))).write_bytes(seg1 + encode_message_set([b"torn"])[:7])
    other = root / "other-2"
    other.mkdir()
    (other / segment_name(0)).write_bytes(b"")
    return root


def test_dump_json_lists_messages_then_summary(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = _log_dir(tmp_path)
    assert cli.main(["logdir", "dump", str(root), "--messages", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    msgs = [x for x in lines if x["type"] == "message"]
    assert [m.get("value") for m in msgs] == ["one", "two", "three", None]
    assert msgs[3]["value_base64"] == "//4="
    assert msgs[0]["offset"] == 0 and msgs[1]["offset"] == msgs[0]["next_offset"]
    summary = lines[-1]
    assert summary["type"] == "summary"
    assert summary["totals"] == {"topics": 2, "partitions": 2, "segments": 3, "messages": 4,
                                 "bytes": summary["partitions"][0]["bytes"],
                                 "torn_tails": 1, "corrupt": 0}
    p0 = summary["partitions"][0]
    assert (p0["topic"], p0["partition"], p0["messages"]) == ("my-topic", 0, 4)
    assert p0["torn_tails"] == [p0["next_offset"]] and p0["end"] == p0["next_offset"] + 7


def test_dump_text_summary_and_filters(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = _log_dir(tmp_path)
    assert cli.main(["logdir", "dump", str(root), "--topic", "my-topic"]) == 0
    out = capsys.readouterr().out
    assert "torn tail at" in out and "other" not in out
    assert out.splitlines()[-1].startswith("total: 1 topics, 1 partitions, 2 segments, 4 messages")


def test_dump_corruption_fails_or_is_reported(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = _log_dir(tmp_path)
    seg = root / "my-topic-0" / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[12] ^= 1  # inside the first payload
    seg.write_bytes(bytes(data))
    assert cli.main(["logdir", "dump", str(root)]) == 1
    assert "at file position 0" in capsys.readouterr().err
    assert cli.main(["logdir", "dump", str(root), "--skip-corrupt", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary["totals"]["corrupt"] == 1 and summary["totals"]["messages"] == 2
