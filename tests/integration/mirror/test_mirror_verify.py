"""``zkconsumer mirror verify``: counts the committed source range against the target."""

from __future__ import annotations

from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.cli import main as cli_main
from zkconsumer.protocol import Compression
from zkconsumer.zk.offsets import commit_offset
from zkconsumer.zk.session import ZkSession


def test_verify_passes_after_a_mirror_and_catches_a_gap(zk_connect, dev_broker, tansu,
                                                        start_mirror, capsys) -> None:
    dev_broker(num_partitions=2)
    create_topic(tansu.bootstrap, "a", 2)
    create_topic(tansu.bootstrap, "merged", 2)
    produce(zk_connect, "a", [f"a{i}".encode() for i in range(120)], chunk=12)
    produce(zk_connect, "b", [f"b{i}".encode() for i in range(90)], chunk=9,
            codec=Compression.SNAPPY)
    produce(zk_connect, "c", [f"c{i}".encode() for i in range(30)])
    create_topic(tansu.bootstrap, "c", 1)
    mirror = start_mirror(tansu.url, topics=["a", "b", "c"], topic_map={"b": "merged",
                                                                       "c": "merged"})
    wait_until(lambda: all(committed(zk_connect, "mirror", t) == log_ends(zk_connect, t)
                           for t in ("a", "b", "c")), timeout=30, what="mirror caught up")
    mirror.stop()

    args = ["mirror", "verify", "--zk", zk_connect, "--group", "mirror", "--to", tansu.url,
            "--topic-map", "b:merged,c:merged"]
    assert cli_main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["a", "a", "120", "120", "-", "OK"]
    assert out[2].split() == ["b,c", "merged", "120", "120", "-", "OK"]
    assert cli_main([*args, "--payloads", "--topic", "a"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["a", "a", "120", "120", "0",
                                                               "OK"]

    # A gap: the group's offsets claim more than the target holds.
    produce(zk_connect, "a", [b"never-mirrored"] * 5, chunk=5)
    with ZkSession(zk_connect) as session:
        for name, end in log_ends(zk_connect, "a").items():
            commit_offset(session, "mirror", "a", name, end)
    assert cli_main([*args, "--topic", "a"]) == 1
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row == ["a", "a", "125", "120", "-", "MISSING"]


def test_verify_to_a_07_target_and_the_no_offsets_case(zk_connect, zk_connect_target,
                                                       dev_broker, start_mirror,
                                                       capsys) -> None:
    dev_broker()
    dev_broker(broker_id=9, zk=zk_connect_target)
    to = f"kafka07://{zk_connect_target}"
    args = ["mirror", "verify", "--zk", zk_connect, "--group", "mirror", "--to", to]
    assert cli_main(args) == 1  # nothing committed yet: nothing to vouch for
    assert "no committed offsets" in capsys.readouterr().err

    produce(zk_connect, "t", [f"m{i}".encode() for i in range(50)], chunk=10,
            codec=Compression.GZIP)
    mirror = start_mirror(to, topics=["t"], partitioning="round-robin")
    wait_until(lambda: committed(zk_connect, "mirror", "t") == log_ends(zk_connect, "t"),
               timeout=30, what="mirror caught up")
    mirror.stop()
    assert cli_main([*args, "--payloads"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == ["t", "t", "50", "50", "0", "OK"]
