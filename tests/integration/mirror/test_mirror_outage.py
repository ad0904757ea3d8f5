"""A target outage stops progress (offsets do not advance), and everything after it arrives.

tansu's memory storage forgets everything when it stops, so the restarted broker is a new,
empty cluster on the same port: the test checks that what the source produced *during* the
outage reaches it, and that no offset was committed past what the old broker acknowledged.
"""

from __future__ import annotations

from collections import Counter

import pytest
from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce


@pytest.mark.parametrize("exactly_once", [True, False], ids=["exactly-once", "at-least-once"])
def test_outage_stops_progress_then_resumes_without_loss(zk_connect, dev_broker, tansu,
                                                         start_mirror, exactly_once) -> None:
    dev_broker(num_partitions=2)
    create_topic(tansu.bootstrap, "audit", 2)
    before = [f"before-{i}".encode() for i in range(300)]
    produce(zk_connect, "audit", before, chunk=30)
    ends_before = log_ends(zk_connect, "audit")
    mirror = start_mirror(tansu.url, topics=["audit"], exactly_once=exactly_once)
    wait_until(lambda: committed(zk_connect, "mirror", "audit") == ends_before, timeout=30,
               what="the first batch mirrored and committed")

    tansu.kill()  # outage: the target crashed (and its in-memory data is gone)
    during = [f"during-{i}".encode() for i in range(300)]
    produce(zk_connect, "audit", during, chunk=30)
    stats = mirror.mirror.stats
    wait_until(lambda: stats.target_errors > 0 and stats.retries > 0, timeout=30,
               what="the mirror noticing the outage")
    assert not stats.healthy
    wait_until(lambda: stats.retries >= 2, timeout=30, what="another retry round")
    # Nothing was acknowledged, so nothing was committed past the pre-outage offsets.
    assert committed(zk_connect, "mirror", "audit") == ends_before
    assert mirror.alive

    tansu.start()  # same port, empty cluster: the operator recreates the topic
    create_topic(tansu.bootstrap, "audit", 2)
    ends = log_ends(zk_connect, "audit")
    wait_until(lambda: committed(zk_connect, "mirror", "audit") == ends, timeout=60,
               what="the mirror resuming after the outage")
    assert stats.healthy
    mirror.stop()

    got = read_partitions(tansu.bootstrap, "audit", len(during))
    have = Counter(v for part in got.values() for _, v in part)
    assert not Counter(during) - have, "a message produced during the outage was lost"
    # and in source order per partition: the resend restarts from the first failure
    for records in got.values():
        seq = [int(v.split(b"-")[1]) for _, v in records if v.startswith(b"during-")]
        first_seen = list(dict.fromkeys(seq))
        assert first_seen == sorted(first_seen)


def test_stop_during_an_outage_commits_only_what_was_acknowledged(zk_connect, dev_broker,
                                                                  tansu, start_mirror) -> None:
    dev_broker()
    create_topic(tansu.bootstrap, "audit", 1)
    produce(zk_connect, "audit", [b"early"] * 50)
    ends_before = log_ends(zk_connect, "audit")
    first = start_mirror(tansu.url, topics=["audit"], consumer_id="first")
    wait_until(lambda: committed(zk_connect, "mirror", "audit") == ends_before, timeout=30,
               what="the first batch committed")
    tansu.kill()
    late = [f"late-{i}".encode() for i in range(100)]
    produce(zk_connect, "audit", late, chunk=10)
    wait_until(lambda: first.mirror.stats.target_errors > 0, timeout=30,
               what="the mirror noticing the outage")
    first.stop()  # SIGTERM-equivalent while the target is down: a clean, bounded stop
    assert committed(zk_connect, "mirror", "audit") == ends_before

    tansu.start()
    create_topic(tansu.bootstrap, "audit", 1)
    second = start_mirror(tansu.url, topics=["audit"], consumer_id="second")
    ends = log_ends(zk_connect, "audit")
    wait_until(lambda: committed(zk_connect, "mirror", "audit") == ends, timeout=30,
               what="the next run mirroring what the outage held back")
    second.stop()
    got = read_partitions(tansu.bootstrap, "audit", len(late))
    assert [v for _, v in got[0]] == late  # in order, none lost, none duplicated
