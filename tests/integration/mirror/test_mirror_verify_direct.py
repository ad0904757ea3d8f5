"""``zkconsumer mirror verify`` after producers switched (cut-over step 3): records written on
the target directly are named, not counted, unless ``--include-direct-writes``; an
at-least-once mirror's records (no provenance headers at all) are counted whole."""

from __future__ import annotations

from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.cli import main as cli_main


def write_direct(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(topic, b"direct-%d" % i)
    assert producer.flush(30) == 0


def test_verify_counts_mirrored_records_only(zk_connect, dev_broker, tansu, start_mirror,
                                             capsys) -> None:
    dev_broker(num_partitions=2)
    create_topic(tansu.bootstrap, "events", 2)
    create_topic(tansu.bootstrap, "plain", 2)
    produce(zk_connect, "events", [f"e{i}".encode() for i in range(60)], chunk=6)
    produce(zk_connect, "plain", [f"p{i}".encode() for i in range(40)], chunk=4)
    mirror = start_mirror(tansu.url, topics=["events"])
    plain = start_mirror(tansu.url, topics=["plain"], group="alo", exactly_once=False)
    wait_until(lambda: committed(zk_connect, "mirror", "events") == log_ends(zk_connect,
                                                                             "events")
               and committed(zk_connect, "alo", "plain") == log_ends(zk_connect, "plain"),
               timeout=60, what="both mirrors caught up")
    mirror.stop()
    plain.stop()
    write_direct(tansu.bootstrap, "events", 7)  # producers switched to the target

    args = ["mirror", "verify", "--zk", zk_connect, "--group", "mirror", "--to", tansu.url,
            "--payloads"]
    assert cli_main(args) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split() == ["events", "events", "60", "60", "0", "OK"]
    assert "events: 7 records written on target (no provenance headers) are not counted" \
        in err
    assert cli_main([*args, "--include-direct-writes"]) == 1
    assert capsys.readouterr().out.splitlines()[1].split() == ["events", "events", "60", "67",
                                                               "0", "EXTRA"]
    # an at-least-once mirror writes no headers: its records are all counted
    assert cli_main(["mirror", "verify", "--zk", zk_connect, "--group", "alo", "--to",
                     tansu.url]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split() == ["plain", "plain", "40", "40", "-", "OK"]
    assert "plain: no record carries provenance headers" in err
