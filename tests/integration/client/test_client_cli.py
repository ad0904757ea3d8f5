"""``zkconsumer fetch`` against a real dev broker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zkconsumer.cli import main
from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import Compression, encode_message_set


@pytest.fixture
def broker(dev_broker: Any) -> Any:
    b = dev_broker(zk=False)
    with BrokerConnection(b.host, b.port) as conn:
        produce(conn, "cli", 0, encode_message_set([b"hello", b"tab\there\nnewline"]),
                confirm=True)
        produce(conn, "cli", 0, encode_message_set([b"\xff\xfe", b"zipped"],
                                                   compression=Compression.GZIP), confirm=True)
    return b


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["fetch", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_text_format_one_line_per_message(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys, "--broker", broker.address, "--topic", "cli")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "0\thello"
    assert lines[1] == "15\ttab\\there\\nnewline"
    assert lines[2].startswith("41\t") and lines[3] == "41\tzipped"
    assert "4 message(s) from cli/0" in err and "next offset" in err


def test_jsonl_and_hex_formats(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--broker", broker.address, "--topic", "cli", "--format",
                         "jsonl")
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0] == {"offset": 0, "next_offset": 15, "size": 5, "value": "hello"}
    assert records[2]["value_base64"] == "//4=" and records[2]["next_offset"] == 41
    end = records[3]["next_offset"]
    status, out, _ = run(capsys, "--broker", broker.address, "--topic", "cli", "--format",
                         "hex", "--max-messages", "1")
    assert out == "0\t68656c6c6f\n"
    status, out, err = run(capsys, "--broker", broker.address, "--topic", "cli", "--offset",
                           "latest")
    assert status == 0 and out == "" and f"next offset {end}" in err


def test_offset_option_and_errors(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "--broker", broker.address, "--topic", "cli", "--offset",
                         "15", "--max-messages", "1")
    assert out == "15\ttab\\there\\nnewline\n"
    status, _, err = run(capsys, "--broker", broker.address, "--topic", "cli", "--offset",
                         "99999")
    assert status == 1 and "offset out of range" in err and "[0, " in err
    status, _, err = run(capsys, "--broker", broker.address, "--topic", "cli", "--offset",
                         "soon")
    assert status == 2
