"""Pure parts of the Spark source: option parsing, split planning, budget sharing (no JVM)."""

from __future__ import annotations

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.spark.options import parse_read_options, parse_write_options
from zkconsumer.spark.planning import split_range
from zkconsumer.spark.stream import share_budget


def test_read_options_are_case_insensitive_strings() -> None:
    opts = parse_read_options({"ZooKeeper.Connect": "zk:2181/kafka", "topic": "a,b",
                               "startingoffsets": "group:g1", "MAXSPLITBYTES": "1024",
                               "failOnDataLoss": "false"})
    assert opts.source == "zookeeper" and opts.topics == ("a", "b")
    assert opts.starting.kind == "group" and opts.starting.group == "g1"
    assert opts.max_split_bytes == 1024 and opts.fail_on_data_loss is False
    assert opts.topic_matches("a") and not opts.topic_matches("c")
    assert parse_read_options({"brokers": "0:h:1,1:h:2", "topic": "t"}).brokers == {
        0: ("h", 1), 1: ("h", 2)}
    pat = parse_read_options({"zk.connect": "z", "pattern": "ev.*"})
    assert pat.topic_matches("events") and not pat.topic_matches("xevents")
    logdir = parse_read_options({"path": "/data/kafka-logs",
                                 "startingOffsets": '{"t": {"0": 5}}'})
    assert logdir.source == "logdir" and logdir.starting.offsets == {"t": {"0": 5}}


@pytest.mark.parametrize(("options", "needle"), [
    ({"topic": "t"}, "exactly one of"),
    ({"zk.connect": "z", "logDir": "/x", "topic": "t"}, "exactly one of"),
    ({"zk.connect": "z"}, "option topic"),
    ({"zk.connect": "z", "topic": "a/b"}, "option topic"),
    ({"zk.connect": "z", "topic": "t", "pattern": "x"}, "mutually exclusive"),
    ({"zk.connect": "z", "pattern": "("}, "option pattern"),
    ({"zk.connect": "z", "topic": "t", "startingOffsets": "first"}, "option startingOffsets"),
    ({"zk.connect": "z", "topic": "t", "startingOffsets": '{"t": {"0": 1}}'},
     "option startingOffsets"),
    ({"zk.connect": "z", "topic": "t", "endingOffsets": '{"t": {"0-0": -3}}'},
     "option endingOffsets"),
    ({"zk.connect": "z", "topic": "t", "endingOffsets": "group:g"}, "option endingOffsets"),
    ({"zk.connect": "z", "topic": "t", "maxSplitBytes": "0"}, "option maxsplitbytes"),
    ({"zk.connect": "z", "topic": "t", "failOnDataLoss": "maybe"}, "option failondataloss"),
    ({"brokers": "0:h", "topic": "t"}, "option brokers"),
    ({"brokers": "0:h:1", "pattern": "t.*"}, "option pattern needs zookeeper.connect"),
    ({"brokers": "0:h:1", "topic": "t", "startingOffsets": "group:g"}, "zookeeper.connect"),
    ({"brokers": "0:h:1", "topic": "t", "commitToGroup": "g"}, "zookeeper.connect"),
])
def test_bad_read_options_name_the_option(options: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_read_options(options)
    assert needle.lower() in str(info.value).lower()


def test_write_options() -> None:
    w = parse_write_options({"brokers": "0:h:9092", "topic": "t", "compression": "SNAPPY"})
    assert w.topic == "t" and int(w.compression) == 2
    for bad in ({"topic": "t"}, {"zk.connect": "z", "brokers": "0:h:1"},
                {"zk.connect": "z", "topic": "a,b"}, {"zk.connect": "z", "compression": "lz4"}):
        with pytest.raises(ConfigurationError):
            parse_write_options(bad)


def test_split_range_cuts_at_segment_boundaries_and_merges() -> None:
    bounds = [0, 100, 200, 300, 1000, 1050]
    assert split_range(0, 1050, bounds, 1) == [(0, 100), (100, 200), (200, 300), (300, 1000),
                                               (1000, 1050)]
    assert split_range(0, 1050, bounds, 250) == [(0, 200), (200, 300), (300, 1000),
                                                 (1000, 1050)]
    assert split_range(150, 1020, bounds, 1 << 30) == [(150, 1020)]
    assert split_range(150, 1020, bounds, 100) == [(150, 200), (200, 300), (300, 1000),
                                                   (1000, 1020)]
    assert split_range(5, 5, bounds, 10) == []


def test_share_budget_is_proportional_and_bounded() -> None:
    assert share_budget({"a": 10, "b": 20}, 100) == {"a": 10, "b": 20}
    assert share_budget({"a": 1000, "b": 3000, "c": 0}, 400) == {"a": 100, "b": 300, "c": 0}
    assert share_budget({"a": 1, "b": 10**9}, 10) == {"a": 1, "b": 9}
