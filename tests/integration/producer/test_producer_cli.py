"""``zkconsumer produce`` reading stdin, against real dev brokers (and ZooKeeper)."""

from __future__ import annotations

import io
import socket
import struct
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until
from producerkit import read_layout, read_values

from zkconsumer.cli import main
from zkconsumer.producer import BrokerPartition as BP
from zkconsumer.producer import Producer
from zkconsumer.protocol import default_partition


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], data: bytes,
        *argv: str) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status = main(["produce", *argv])
    return status, capsys.readouterr().err


def test_lines_to_a_static_broker(dev_broker: Any, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    b = dev_broker(zk=False)
    status, err = run(monkeypatch, capsys, b"one\ntwo\r\n\nlast-no-newline",
                      "--broker-list", f"0:{b.host}:{b.port}", "--topic", "lines", "--confirm",
                      "--compression", "snappy")
    assert status == 0
    assert "produced 4 message(s), 21 bytes" in err and "0 failed" in err
    assert read_values(b, "lines", 0) == [b"one", b"two", b"", b"last-no-newline"]


def test_binary_records_async(dev_broker: Any, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    b = dev_broker(zk=False)
    records = [b"\x00\x01\n\xff", b"", b"x" * 300]
    data = b"".join(struct.pack(">i", len(r)) + r for r in records)
    status, err = run(monkeypatch, capsys, data, "--broker-list", f"0:{b.host}:{b.port}",
                      "--topic", "bin", "--binary", "--async", "--batch-size", "2",
                      "--set", "confirm=true")
    assert status == 0, err
    assert read_values(b, "bin", 0) == records


def test_truncated_binary_input_is_an_error(dev_broker: Any, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    b = dev_broker(zk=False)
    status, err = run(monkeypatch, capsys, struct.pack(">i", 10) + b"short",
                      "--broker-list", f"0:{b.host}:{b.port}", "--topic", "bin", "--binary")
    assert status == 1 and "truncated record" in err


def test_keyed_lines_through_zookeeper_and_config_file(
        dev_broker: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    brokers = dev_broker.many(2, topic_partitions={"kl": 2})
    with Producer(zk_connect=dev_broker.zk_connect, confirm=True) as warm:
        for b in (0, 1):  # get both brokers to register the topic: 4 partitions
            warm.send("kl", b"warm", key=next(
                k for k in map(str, range(100)) if default_partition(k, 2) == b))
    props = tmp_path / "producer.properties"
    props.write_text(f"zk.connect={dev_broker.zk_connect}\nconfirm=true\n"
                     "# a comment\nserializer.class=kafka.serializer.StringEncoder\n")
    keys = ["alpha", "beta", "gamma", "delta"]
    data = "".join(f"{k}|value-{k}\n" for k in keys).encode()
    with Producer(zk_connect=dev_broker.zk_connect) as probe:
        wait_until(lambda: len(probe.partitions_for("kl")) == 4, what="registrations")
    status, err = run(monkeypatch, capsys, data, "--config", str(props), "--topic", "kl",
                      "--key-separator", "|")
    assert status == 0, err
    parts = [BP(b, p) for b in (0, 1) for p in range(2)]
    layout = read_layout(brokers, "kl", 2)
    for k in keys:
        bp = parts[default_partition(k, 4)]
        assert f"value-{k}".encode() in layout[(bp.broker_id, bp.partition)]


def test_failures_give_a_non_zero_exit(monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    status, err = run(monkeypatch, capsys, b"a\nb\nc\n", "--broker-list", f"0:127.0.0.1:{port}",
                      "--topic", "lost", "--set", "num.retries=0")
    assert status == 1
    assert "produced 0 message(s)" in err and "3 failed" in err


def test_bad_settings_are_configuration_errors(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    status, err = run(monkeypatch, capsys, b"", "--broker-list", "0:127.0.0.1:1", "--topic",
                      "t", "--set", "batch.sise=3")
    assert status == 1 and "batch.sise" in err
    status, err = run(monkeypatch, capsys, b"", "--topic", "t")
    assert status == 1 and "zk.connect" in err
