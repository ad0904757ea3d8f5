"""``offsets import`` and ``offsets reset --to FILE`` agree on misaligned offsets (issue 11).

Before, reset refused an offset inside a message while import wrote it, and the group's
consumers then read garbage.  Both now check against the broker holding the partition and
say what they could not check.  Real ZooKeeper and dev broker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until

from zkconsumer.cli import main
from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import encode_message_set
from zkconsumer.zk.offsets import read_group_offsets
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

ENTRY = 4 + 6 + 4  # one message with a 4-byte payload


@pytest.fixture
def broker(dev_broker: Any, zk_session: ZkSession) -> Any:
    b = dev_broker(topic_partitions={"t": 2})
    with BrokerConnection(b.host, b.port) as conn:
        for p in range(2):
            produce(conn, "t", p, encode_message_set([b"m%03d" % i for i in range(20)]),
                    confirm=True)
    wait_until(lambda: read_topic_partitions(zk_session, "t") == {b.broker_id: 2},
               what="topic registered")
    return b


def _file(tmp_path: Path, **offsets: int) -> str:
    f = tmp_path / "offsets.txt"
    f.write_text("".join(f"/consumers/g/offsets/t/{p.replace('_', '-')}:{n}\n"
                         for p, n in offsets.items()))
    return str(f)


@pytest.mark.parametrize("command", ["import", "reset"])
def test_a_misaligned_offset_is_refused_by_import_and_reset(
        broker: Any, zk_connect: str, zk_session: ZkSession, tmp_path: Path, command: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = _file(tmp_path, **{"0_0": 17, "0_1": 3 * ENTRY})
    argv = (["offsets", "import", "--zk", zk_connect, path] if command == "import" else
            ["offsets", "reset", "--zk", zk_connect, "--group", "g", "--topic", "t",
             "--to", path])
    # before: import wrote 17, and the group's consumers read garbage from there
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert (f"0-0: 17 is not the start of a message: it falls inside the message "
            f"[{ENTRY}, {2 * ENTRY})") in err
    assert "0-1" not in err
    assert read_group_offsets(zk_session, "g") == {}
    # aligned offsets pass both
    assert main([*argv[:-1], _file(tmp_path, **{"0_0": 2 * ENTRY, "0_1": 3 * ENTRY})]) == 0
    assert read_group_offsets(zk_session, "g") == {"t": {"0-0": 2 * ENTRY, "0-1": 3 * ENTRY}}


def test_import_says_what_it_could_not_check(broker: Any, zk_connect: str,
                                             zk_session: ZkSession, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    broker.stop()  # /brokers/topics/t stays (a persistent copy keeps the partitions listed)
    zk_session.update_persistent("/brokers/topics/t/0", b"2")
    wait_until(lambda: not zk_session.exists("/brokers/ids/0"), what="broker deregistered")
    path = _file(tmp_path, **{"0_0": 17})
    assert main(["offsets", "import", "--zk", zk_connect, path]) == 0
    err = capsys.readouterr().err
    assert "g t 0-0: 17 not checked against the log: broker 0 is not registered" in err
    assert read_group_offsets(zk_session, "g") == {"t": {"0-0": 17}}
