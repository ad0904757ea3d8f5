"""``zkconsumer mirror translate --reverse``: a group moved to the target, consumed part of it
(stopping inside what was a gzip set on 0.7), and is rolled back to 0.7; then moved forward
again.  Counting consumers at every step: nothing is skipped, and the only duplicates are the
ones the plan announced (the 0.7 consumer restarts at the set's start)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from group_helpers import consume07, consume_target, source_values
from mirror_helpers import committed, log_ends, produce

from zkconsumer import cli
from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.protocol import Compression

MAP = "orders:orders-new,a:merged,b:merged"


def plan_column(out: str, column: int, topic: str) -> int:
    """The sum of one column of a printed plan over the rows of ``topic``."""
    return sum(int(line.split()[column]) for line in out.splitlines()[1:]
               if line.split()[0] == topic)


def test_rollback_and_reforward_are_exact(zk_connect, dev_broker, tansu, start_mirror,
                                          capsys) -> None:
    dev_broker(num_partitions=2)
    produce(zk_connect, "orders", [f"o-{i}".encode() for i in range(400)], chunk=10,
            codec=Compression.GZIP)
    produce(zk_connect, "a", [f"a-{i}".encode() for i in range(200)], chunk=10,
            codec=Compression.GZIP)
    produce(zk_connect, "b", [f"b-{i}".encode() for i in range(200)], chunk=10)
    for topic, count in (("orders", 137), ("a", 61), ("b", 53)):
        consume07(zk_connect, "billing", [topic], count)
    create_topic(tansu.bootstrap, "orders-new", 2)
    create_topic(tansu.bootstrap, "merged", 2)
    m = start_mirror(tansu.url, topics=["orders", "a", "b"], group="m",
                     topic_map={"orders": "orders-new", "a": "merged", "b": "merged"})
    wait_until(lambda: all(committed(zk_connect, "m", t) == log_ends(zk_connect, t)
                           for t in ("orders", "a", "b")), timeout=90, what="the mirror")
    m.stop()

    forward = ["mirror", "translate", "--zk", zk_connect, "--group", "billing",
               "--mirror-group", "m", "--to", tansu.url, "--target-group", "billing-new",
               "--topic-map", MAP, "--apply"]
    assert cli.main(forward) == 0
    capsys.readouterr()
    left07 = {t: source_values(zk_connect, t, group="billing") for t in ("orders", "a", "b")}

    # the moved group consumes part of each target topic: 73 of "orders-new" ends inside a
    # run of 10 records that was one gzip set on 0.7
    got_new = Counter(consume_target(tansu.bootstrap, "billing-new", "orders-new", 73))
    got_merged = Counter(consume_target(tansu.bootstrap, "billing-new", "merged", 45))
    assert not got_new - left07["orders"]  # it read only what the 0.7 group had left

    reverse = ["mirror", "translate", "--reverse", "--zk", zk_connect, "--group", "billing",
               "--mirror-group", "m", "--to", tansu.url, "--target-group", "billing-new",
               "--topic-map", MAP]
    assert cli.main(reverse) == 0
    dry = capsys.readouterr()
    assert "dry run" in dry.err and dry.out.startswith("0.7 topic")
    assert cli.main([*reverse, "--apply"]) == 0
    out, err = capsys.readouterr()
    again = {t: plan_column(out, 5, t) for t in ("orders", "a", "b")}
    assert again["orders"] > 0 and "delivered again" in err  # stopped inside a gzip set
    assert again["b"] == 0  # uncompressed: resumes exactly after the last record consumed

    # rollback: the 0.7 group gets what the moved group had not consumed, and again only
    # what the plan announced (all of it messages the moved group had consumed)
    rest = {"orders": left07["orders"] - got_new,
            "merged": left07["a"] + left07["b"] - got_merged}
    got07 = Counter(consume07(zk_connect, "billing", ["orders"], None,
                              expected=rest["orders"].total() + again["orders"]))
    assert not rest["orders"] - got07  # nothing skipped
    assert (got07 - rest["orders"]).total() == again["orders"]
    assert not (got07 - rest["orders"]) - got_new  # duplicates only of what was consumed
    got07m = Counter(consume07(zk_connect, "billing", ["a", "b"], None,
                               expected=rest["merged"].total() + again["a"] + again["b"]))
    assert not rest["merged"] - got07m
    assert (got07m - rest["merged"]).total() == again["a"] + again["b"]
    assert not (got07m - rest["merged"]) - got_merged

    # re-forward after the rollback: the 0.7 group reads a little more, moves again, and the
    # target group gets exactly what the 0.7 group has not consumed
    produce(zk_connect, "orders", [f"late-{i}".encode() for i in range(30)], chunk=10,
            codec=Compression.GZIP)
    m = start_mirror(tansu.url, topics=["orders", "a", "b"], group="m",
                     topic_map={"orders": "orders-new", "a": "merged", "b": "merged"})
    wait_until(lambda: committed(zk_connect, "m", "orders") == log_ends(zk_connect, "orders"),
               timeout=90, what="the mirror")
    m.stop()
    consume07(zk_connect, "billing", ["orders"], 17)
    assert cli.main(forward) == 0
    capsys.readouterr()
    want = source_values(zk_connect, "orders", group="billing")
    got = Counter(consume_target(tansu.bootstrap, "billing-new", "orders-new", None,
                                 expected=want.total()))
    assert got == want and 0 < want.total() < 30


def mirrored_and_moved(zk_connect: str, tansu: Any, start_mirror: Any, partitions: int,
                       messages: int, consumed: int) -> list[str]:
    """0.7 topic ``t`` (gzip sets of 10 on ``partitions`` partitions), group ``g07`` consumed
    ``consumed`` messages, mirror ``m`` copied it all to tansu's ``t``, and ``g07`` moved to
    target group ``g``.  Returns the translate arguments without ``--target-group``."""
    produce(zk_connect, "t", [f"t-{i}".encode() for i in range(messages)], chunk=10,
            codec=Compression.GZIP)
    consume07(zk_connect, "g07", ["t"], consumed)
    create_topic(tansu.bootstrap, "t", partitions)
    m = start_mirror(tansu.url, topics=["t"], group="m")
    wait_until(lambda: committed(zk_connect, "m", "t") == log_ends(zk_connect, "t"),
               timeout=60, what="the mirror")
    m.stop()
    base = ["mirror", "translate", "--zk", zk_connect, "--group", "g07", "--mirror-group",
            "m", "--to", tansu.url]
    assert cli.main([*base, "--target-group", "g", "--apply"]) == 0
    return base


def test_rollback_refusals(zk_connect, dev_broker, tansu, start_mirror, capsys) -> None:
    dev_broker(num_partitions=1)
    base = mirrored_and_moved(zk_connect, tansu, start_mirror, 1, 40, 10)
    before = committed(zk_connect, "g07", "t")
    reverse = [*base, "--reverse", "--target-group", "g", "--apply"]

    # a target group that never committed cannot be mapped
    assert cli.main([*base, "--reverse", "--target-group", "nobody", "--apply"]) == 1
    assert "cannot map: t/0: target group nobody has no committed offset" in \
        capsys.readouterr().err
    # a live member of the 0.7 group
    config = ConsumerConfig(group_id="g07", zk_connect=zk_connect, autocommit_enable=False)
    with GroupConsumer(config, Subscription(topics={"t": 1})):
        assert cli.main(reverse) == 1
        assert "0.7 group g07 still has live members" in capsys.readouterr().err
    # a live member of the target group
    from confluent_kafka import Consumer, Producer

    member = Consumer({"bootstrap.servers": tansu.bootstrap, "group.id": "g",
                       "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        member.subscribe(["t"])
        wait_until(lambda: member.poll(0.1) is None and bool(member.assignment()),
                   timeout=60, what="an assignment")
        assert cli.main(reverse) == 1
        assert "target group g is STABLE" in capsys.readouterr().err
    finally:
        member.close()
    # records written on the target that the target group has not consumed exist only there

    producer = Producer({"bootstrap.servers": tansu.bootstrap})
    producer.produce("t", b"direct", partition=0)
    producer.flush(30)
    assert cli.main(reverse) == 1
    err = capsys.readouterr().err
    assert "1 records written on target" in err and "exist only there" in err
    assert cli.main([*base, "--target-group", "g"]) == 0  # forward: named, not "replayed"
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split()[4:] == ["0", "1"]
    assert "1 target records were written on target" in err
    assert committed(zk_connect, "g07", "t") == before  # nothing was written
    got = consume_target(tansu.bootstrap, "g", "t", None, expected=31)
    assert got.count(b"direct") == 1
    assert cli.main(reverse) == 0
    assert "had consumed 1 records written on target" in capsys.readouterr().err
    assert committed(zk_connect, "g07", "t") == log_ends(zk_connect, "t")


def test_rollback_while_the_bridge_feeds_07(zk_connect, dev_broker, tansu, start_mirror,
                                            capsys) -> None:
    """Producers already write to the target and a bridge (gzip into 0.7) feeds the groups
    still on 0.7: a moved group rolls back into what the bridge wrote, exactly."""
    from bridge_helpers import produce_modern, read_07, start_bridge

    dev_broker(num_partitions=2)
    base = [*mirrored_and_moved(zk_connect, tansu, start_mirror, 2, 100, 40),
            "--target-group", "g"]
    left07 = source_values(zk_connect, "t", group="g07")
    got = Counter(consume_target(tansu.bootstrap, "g", "t", 30))

    def bridged() -> Counter[bytes]:
        return Counter(v for vs in read_07(zk_connect, "t").values() for v in vs
                       if v.startswith(b"n"))

    direct = [(None, f"n-{i}".encode()) for i in range(200)]
    produce_modern(tansu.bootstrap, "t", direct, 2)
    bridge = start_bridge(tansu.bootstrap, zk_connect, ["t"], group="b",
                          target_options={"compression.codec": "gzip"})
    wait_until(lambda: bridged().total() == 200, timeout=60, what="the bridge")
    bridge.stop()
    got += Counter(consume_target(tansu.bootstrap, "g", "t", 137))
    late = [(None, f"n-{i}".encode()) for i in range(200, 250)]
    produce_modern(tansu.bootstrap, "t", late, 2)  # not in 0.7 yet: the bridge is stopped

    assert cli.main([*base, "--reverse", "--apply"]) == 0
    out, err = capsys.readouterr()
    again = plan_column(out, 5, "t")
    assert "cannot map" not in err
    bridge = start_bridge(tansu.bootstrap, zk_connect, ["t"], group="b",
                          target_options={"compression.codec": "gzip"})
    wait_until(lambda: bridged().total() == 250, timeout=60, what="the bridge")
    bridge.stop()
    rest = left07 + Counter(v for _k, v in direct + late) - got
    got07 = Counter(consume07(zk_connect, "g07", ["t"], None, expected=rest.total() + again))
    assert not rest - got07  # nothing skipped
    assert (got07 - rest).total() == again and not (got07 - rest) - got
