"""Several mirror processes share one 0.7 group; metrics show what each did."""

from __future__ import annotations

import urllib.request
from collections import Counter

from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.mirror.metrics import MirrorCollector, MirrorMetrics, start_metrics_server


def test_two_mirrors_share_the_partitions_and_lose_nothing_across_the_rebalance(
        zk_connect, dev_broker, tansu, start_mirror) -> None:
    dev_broker.many(2, num_partitions=2)
    create_topic(tansu.bootstrap, "shared", 4)
    first_batch = [f"one-{i}".encode() for i in range(400)]
    produce(zk_connect, "shared", first_batch, chunk=20)

    a = start_mirror(tansu.url, topics=["shared"], consumer_id="a")
    # b joins while a is still busy: a's revoked partitions may have sends in flight
    wait_until(lambda: a.mirror.stats.sent > 0, timeout=30, what="mirror a sending")
    b = start_mirror(tansu.url, topics=["shared"], consumer_id="b")

    def split() -> bool:
        owned_a = a.mirror.consumer.owned_partitions().get("shared", [])  # type: ignore[attr-defined]
        owned_b = b.mirror.consumer.owned_partitions().get("shared", [])  # type: ignore[attr-defined]
        return len(owned_a) == 2 and len(owned_b) == 2

    wait_until(split, timeout=30, what="the group splitting 4 partitions 2 + 2")
    second_batch = [f"two-{i}".encode() for i in range(400)]
    produce(zk_connect, "shared", second_batch, chunk=20)
    ends = log_ends(zk_connect, "shared")
    wait_until(lambda: committed(zk_connect, "mirror", "shared") == ends, timeout=30,
               what="both mirrors catching up")
    assert a.mirror.stats.messages > 0 and b.mirror.stats.messages > 0  # both did work

    # metrics of one member, scraped over HTTP like Prometheus would
    collector = MirrorCollector(b.mirror.stats,
                                lambda: b.mirror.consumer.stats.partitions)  # type: ignore[attr-defined]
    server = start_metrics_server(0, MirrorMetrics(collector), lambda: (True, "ok"),
                                  host="127.0.0.1")
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics",
                                      timeout=5).read().decode()
        health = urllib.request.urlopen(f"http://127.0.0.1:{server.port}/healthz",
                                        timeout=5).read().decode()
    finally:
        server.close()
    assert f'zkconsumer_mirror_messages_total{{topic="shared"}} {b.mirror.stats.messages}.0' \
        in body
    assert "zkconsumer_mirror_in_flight" in body and "zkconsumer_mirror_healthy 1.0" in body
    assert f"zkconsumer_mirror_transactions_total {b.mirror.stats.transactions}.0" in body
    assert "zkconsumer_mirror_lag_messages 0.0" in body  # caught up: nothing in flight or unread
    assert 'zkconsumer_mirror_source_committed_offset{partition="' in body
    assert health.strip() == "ok"

    a.stop()
    b.stop()
    got = read_partitions(tansu.bootstrap, "shared", len(first_batch) + len(second_batch))
    have = Counter(v for part in got.values() for _, v in part)
    assert not Counter(first_batch + second_batch) - have


def test_whitelist_mirrors_matching_topics_only(zk_connect, dev_broker, tansu,
                                                start_mirror) -> None:
    dev_broker()
    for topic in ("logs.web", "logs.db", "metrics"):
        create_topic(tansu.bootstrap, topic, 1)
        produce(zk_connect, topic, [f"{topic}-{i}".encode() for i in range(30)])
    mirror = start_mirror(tansu.url, whitelist=r"logs\..*")
    wait_until(lambda: all(committed(zk_connect, "mirror", t) == log_ends(zk_connect, t)
                           for t in ("logs.web", "logs.db")), timeout=30,
               what="the whitelisted topics mirrored")
    mirror.stop()
    assert committed(zk_connect, "mirror", "metrics") == {}
    for topic in ("logs.web", "logs.db"):
        got = read_partitions(tansu.bootstrap, topic, 30)
        assert sorted(v for _, v in got[0]) == sorted(f"{topic}-{i}".encode() for i in range(30))
    assert mirror.mirror.stats.snapshot()["per_topic"].keys() == {"logs.web", "logs.db"}
