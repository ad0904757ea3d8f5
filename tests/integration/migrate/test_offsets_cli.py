"""``zkconsumer offsets``: export/import/reset against real ZooKeeper and a real dev broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until

from zkconsumer import cli
from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import Compression, encode_message_set
from zkconsumer.zk.offsets import commit_offset, read_group_offsets
from zkconsumer.zk.paths import consumer_id_path, offset_path
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

OFFSETS = {"orders": {"0-0": 120, "0-1": 0, "1-0": 286894308}, "audit-log": {"2-3": 7}}


def _commit_all(session: ZkSession, group: str, offsets: dict[str, dict[str, int]]) -> None:
    for topic, parts in offsets.items():
        for part, n in parts.items():
            commit_offset(session, group, topic, part, n)


@pytest.mark.parametrize("fmt", ["scala", "json"])
def test_export_import_round_trip(zk_connect: str, zk_session: ZkSession, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    _commit_all(zk_session, "g1", OFFSETS)
    _commit_all(zk_session, "other", {"x": {"0-0": 1}})
    out = tmp_path / f"offsets.{fmt}"
    assert cli.main(["offsets", "export", "--zk", zk_connect, "--group", "g1",
                     "--format", fmt, "--output", str(out)]) == 0
    text = out.read_text()
    if fmt == "scala":
        assert "/consumers/g1/offsets/orders/1-0:286894308\n" in text
        assert len(text.splitlines()) == 4
    else:
        assert json.loads(text) == {"group": "g1", "offsets": OFFSETS}
    # wipe the group and one changed value, then import
    zk_session.delete(offset_path("g1", "orders", "0-0"))
    commit_offset(zk_session, "g1", "orders", "0-1", 99)
    capsys.readouterr()
    assert cli.main(["offsets", "import", "--zk", zk_connect, str(out)]) == 0
    report = capsys.readouterr().out
    assert "g1 orders 0-0: none -> 120" in report
    assert "g1 orders 0-1: 99 -> 0" in report
    assert "g1 orders 1-0: 286894308 -> 286894308 (unchanged)" in report
    assert "updated 2 of 4 partitions" in report
    assert read_group_offsets(zk_session, "g1") == OFFSETS
    assert read_group_offsets(zk_session, "other") == {"x": {"0-0": 1}}


def test_export_all_groups_to_stdout(zk_connect: str, zk_session: ZkSession,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    _commit_all(zk_session, "a", {"t": {"0-0": 1}})
    _commit_all(zk_session, "b", {"t": {"0-0": 2}})
    assert cli.main(["offsets", "export", "--zk", zk_connect]) == 0
    assert capsys.readouterr().out == ("/consumers/a/offsets/t/0-0:1\n"
                                       "/consumers/b/offsets/t/0-0:2\n")


def test_import_refuses_live_group_and_bad_files(zk_connect: str, zk_session: ZkSession,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    commit_offset(zk_session, "live", "t", "0-0", 5)
    member = ZkSession(zk_connect).start()
    try:
        member.create_ephemeral_expect_conflict(consumer_id_path("live", "live_c1"),
                                                b'{ "t": 1 }')
        f = tmp_path / "in.txt"
        f.write_text("/consumers/live/offsets/t/0-0:50\n")
        assert cli.main(["offsets", "import", "--zk", zk_connect, str(f)]) == 1
        assert "live member" in capsys.readouterr().err
        assert read_group_offsets(zk_session, "live") == {"t": {"0-0": 5}}
        assert cli.main(["offsets", "import", "--zk", zk_connect, str(f), "--force",
                         "--dry-run"]) == 0
        assert "would change" in capsys.readouterr().out
        assert read_group_offsets(zk_session, "live") == {"t": {"0-0": 5}}
        assert cli.main(["offsets", "import", "--zk", zk_connect, str(f), "--force"]) == 0
        assert read_group_offsets(zk_session, "live") == {"t": {"0-0": 50}}
    finally:
        member.close()
    bad = tmp_path / "bad.txt"
    bad.write_text("/consumers/g/offsets/t/0-0:1\n/consumers/g/offsets/t/0-1:\n")
    assert cli.main(["offsets", "import", "--zk", zk_connect, str(bad)]) == 1
    assert "bad.txt:2:" in capsys.readouterr().err
    assert read_group_offsets(zk_session, "g") == {}  # nothing written, not even line 1


def test_import_warns_about_unregistered_topics_and_partitions(
        zk_connect: str, zk_session: ZkSession, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    zk_session.update_persistent("/brokers/topics/known/0", b"2")  # partitions 0-0 and 0-1
    zk_session.update_persistent("/brokers/topics/junk/0", b"x")
    f = tmp_path / "in.txt"
    f.write_text("/consumers/g/offsets/known/0-1:5\n/consumers/g/offsets/known/0-7:6\n"
                 "/consumers/g/offsets/ghost/0-0:7\n/consumers/g/offsets/junk/0-0:8\n")
    assert cli.main(["offsets", "import", "--zk", zk_connect, str(f)]) == 0
    err = capsys.readouterr().err
    assert "topic ghost is not registered in /brokers/topics" in err
    assert "topic known has no partition 0-7" in err
    assert "topic junk: cannot check its partitions" in err
    # 0-1 is registered, but no broker 0 runs to check its alignment against: said so
    assert [line for line in err.splitlines() if "0-1" in line] == [
        "warning: g known 0-1: 5 not checked against the log: broker 0 is not registered"]
    # written anyway: importing ahead of the topic is a normal migration step
    assert read_group_offsets(zk_session, "g") == {"known": {"0-1": 5, "0-7": 6},
                                                   "ghost": {"0-0": 7}, "junk": {"0-0": 8}}


def _produce_topic(broker: Any, zk_session: ZkSession, topic: str, n_parts: int) -> None:
    with BrokerConnection(broker.host, broker.port) as conn:
        for p in range(n_parts):
            produce(conn, topic, p, encode_message_set([b"a" * 10] * (p + 1)), confirm=True)
            produce(conn, topic, p, encode_message_set([b"b"] * 3,
                                                       compression=Compression.GZIP),
                    confirm=True)
    wait_until(lambda: read_topic_partitions(zk_session, topic) == {broker.broker_id: n_parts},
               what="topic registration")


def test_reset_earliest_latest_and_validated_file(dev_broker: Any, zk_connect: str,
                                                  zk_session: ZkSession, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    b = dev_broker(num_partitions=2)
    _produce_topic(b, zk_session, "events", 2)
    assert cli.main(["offsets", "--broker", b.address, "--topic", "events", "--partition",
                     "1", "--time", "-1"]) == 0
    latest1 = int(capsys.readouterr().out.split()[0])
    assert cli.main(["offsets", "--broker", b.address, "--topic", "events", "--partition",
                     "0", "--time", "-1", "--max", "10"]) == 0
    latest0 = int(capsys.readouterr().out.split()[0])
    assert latest1 > latest0 > 0

    assert cli.main(["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic",
                     "events", "--to", "latest"]) == 0
    assert "updated 2 of 2 partitions" in capsys.readouterr().out
    assert read_group_offsets(zk_session, "g") == {"events": {"0-0": latest0, "0-1": latest1}}
    assert cli.main(["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic",
                     "events", "--to", "earliest", "--dry-run"]) == 0
    assert read_group_offsets(zk_session, "g")["events"]["0-0"] == latest0
    assert cli.main(["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic",
                     "events", "--to", "earliest"]) == 0
    assert read_group_offsets(zk_session, "g") == {"events": {"0-0": 0, "0-1": 0}}

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"group": "g", "offsets": {"events": {
        "0-0": latest0 + 1, "0-1": 10, "0-7": 0}}}))
    assert cli.main(["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic",
                     "events", "--to", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"0-0: {latest0 + 1} is outside the log [0, {latest0}]" in err
    assert "0-7: topic events has no such partition" in err
    assert "0-1: 10 is not the start of a message" in err
    assert read_group_offsets(zk_session, "g") == {"events": {"0-0": 0, "0-1": 0}}
    good = tmp_path / "good.txt"
    good.write_text(f"/consumers/g/offsets/events/0-1:{latest1}\n")
    assert cli.main(["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic",
                     "events", "--to", str(good)]) == 0
    assert read_group_offsets(zk_session, "g") == {"events": {"0-0": 0, "0-1": latest1}}
