"""The at-least-once target's run path against a real Kafka-protocol broker (tansu).

`KafkaTarget.send_run` hands a run bound for one partition to librdkafka in one
``produce_batch``; librdkafka may then refuse single messages *inside* the run and queue the
ones after them.  These tests hold the two consequences: a refused message in the middle of a
run is never acknowledged -- the 0.7 offset committed stays before it although the messages
after it did reach the target -- and a full client queue only delays a run (no gap, no
reordering, nothing reported failed).
"""

from __future__ import annotations

from fixtures.outcomes import Outcomes
from fixtures.tansu import create_topic, read_partitions
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce

from zkconsumer.errors import TargetError
from zkconsumer.mirror.targets import KafkaTarget


def test_a_refused_message_mid_run_is_never_acknowledged(zk_connect, dev_broker, tansu,
                                                         start_mirror) -> None:
    dev_broker()
    create_topic(tansu.bootstrap, "mid", 1)
    produce(zk_connect, "mid", [b"head-%d" % i for i in range(20)], chunk=20)
    at_big = log_ends(zk_connect, "mid")["0-0"]  # the big message's offset
    # the big one and what follows it in one message set: one poll, one run around it
    produce(zk_connect, "mid", [b"x" * 5000] + [b"tail-%d" % i for i in range(20)], chunk=21)
    m = start_mirror(tansu.url, topics=["mid"], exactly_once=False,
                     target_options={"message.max.bytes": "2000"})
    wait_until(lambda: not m.alive, timeout=30, what="the mirror stopping on the refusal")
    assert isinstance(m.error, TargetError) and "5000-byte" in str(m.error)
    m.error = None
    assert committed(zk_connect, "mirror", "mid").get("0-0", 0) <= at_big
    # librdkafka queued -- and tansu acknowledged -- the messages after the refused one: the
    # committed offset above held all the same, because the run failed as one
    got = read_partitions(tansu.bootstrap, "mid", 40)
    values = [v for _k, v in got[0]]
    assert b"x" * 5000 not in values
    assert [v for v in values if v.startswith(b"tail-")] == [b"tail-%d" % i for i in range(20)]


def test_a_run_with_a_refused_message_fails_although_the_rest_was_delivered(tansu) -> None:
    # the target-level half of the test above, without the engine's own safeguard (it marks
    # the run failed when send_run raises): the run's report itself must be a failure
    target = KafkaTarget([tansu.bootstrap], {"message.max.bytes": "2000"})
    try:
        target.create_topic("gap", 1, 1)
        target.open()
        outcome = Outcomes()
        items = [(b"before-%d" % i, 0, None) for i in range(5)] + [(b"x" * 5000, 0, None)] \
            + [(b"after-%d" % i, 0, None) for i in range(5)]
        try:
            target.send_run("gap", items, outcome, stream="s")
        except TargetError:
            pass
        else:
            raise AssertionError("a refused message must raise TargetError")
        assert target.flush(30) and outcome.wait(1, 30)
        got = read_partitions(tansu.bootstrap, "gap", 10)
        assert [v for _k, v in got[0]] == [v for v, _p, _k in items if len(v) < 100]
        assert len(outcome.results) == 1 and outcome.results[0] is not None  # failed as one
    finally:
        target.close()


def test_a_full_client_queue_delays_runs_without_gaps_or_reordering(tansu) -> None:
    # a client queue of 100 messages and runs of 250: every run is refused in part by
    # produce_batch (queue full) and its refused suffix produced again once deliveries made
    # room -- nothing may be reported failed, lost, duplicated or reordered
    runs, per_run = 12, 250
    target = KafkaTarget([tansu.bootstrap], {"queue.buffering.max.messages": "100"})
    try:
        target.create_topic("tight", 2, 1)
        target.open()
        outcomes = Outcomes()
        for r in range(runs):
            for s in range(2):  # two streams, each into its own partition
                items = [(b"s%d-%06d" % (s, r * per_run + i), s, None) for i in range(per_run)]
                target.send_run("tight", items, outcomes, stream=("src", s))
        assert target.flush(30)
        assert outcomes.wait(2 * runs, 30) and outcomes.results == [None] * (2 * runs)
        got = read_partitions(tansu.bootstrap, "tight", 2 * runs * per_run)
        for s in range(2):
            assert [v for _k, v in got[s]] == [b"s%d-%06d" % (s, i)
                                              for i in range(runs * per_run)]
    finally:
        target.close()
