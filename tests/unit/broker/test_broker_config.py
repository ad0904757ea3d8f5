"""Broker configuration: 0.7 property names, defaults, validation, CLI precedence."""

from __future__ import annotations

import logging

import pytest

from zkconsumer.broker.cli import build_config
from zkconsumer.broker.config import BrokerConfig, parse_topic_map
from zkconsumer.broker.topics import validate_topic_name
from zkconsumer.cli import build_parser
from zkconsumer.errors import ConfigurationError, InvalidTopicError
from zkconsumer.properties import parse_properties
from zkconsumer.protocol.logformat import parse_partition_dir


def test_defaults_are_the_072_defaults():
    c = BrokerConfig(broker_id=0, log_dir="/x")
    assert (c.port, c.num_partitions, c.flush_interval, c.flush_interval_ms,
            c.flush_scheduler_interval_ms, c.log_file_size, c.max_message_size,
            c.max_request_size, c.max_topic_name_length, c.log_roll_hours,
            c.socket_send_buffer) == (6667, 1, 500, 3000, 3000, 1 << 30, 1000000,
                                      104857600, 255, 168, 102400)
    assert c.host is None and c.zk_connect is None and not c.uses_zookeeper and not c.fsync


def test_from_properties_reads_072_keys():
    props = parse_properties("""
# a Kafka 0.7.2 server.properties
brokerid=3
port = 9092
hostname: kafka3.example.com
log.dir=/var/kafka
num.partitions 4
topic.partition.count.map=clicks:8,views:2
log.file.size=536870912
log.flush.interval=10000
log.default.flush.scheduler.interval.ms=1000
max.message.size=2000000
max.socket.request.bytes=1048576
max.topic.name.length=100
zk.connect=zk1:2181,zk2:2181/kafka
zk.sessiontimeout.ms=4000
num.threads=8
""")
    c = BrokerConfig.from_properties(props)
    assert c.broker_id == 3 and c.port == 9092 and c.host == "kafka3.example.com"
    assert c.log_dir == "/var/kafka" and c.num_partitions == 4
    assert dict(c.topic_partitions) == {"clicks": 8, "views": 2}
    assert c.partitions_for("clicks") == 8 and c.partitions_for("other") == 4
    assert c.log_file_size == 536870912 and c.flush_interval == 10000
    # log.default.flush.interval.ms defaults to the scheduler interval, as in 0.7.2
    assert c.flush_scheduler_interval_ms == 1000 and c.flush_interval_ms == 1000
    assert c.max_message_size == 2000000 and c.max_request_size == 1048576
    assert c.max_topic_name_length == 100
    assert c.zk_connect == "zk1:2181,zk2:2181/kafka" and c.uses_zookeeper
    assert c.zk_session_timeout_ms == 4000 and c.zk_connection_timeout_ms == 4000


def test_enable_zookeeper_false_means_standalone():
    c = BrokerConfig.from_properties({"brokerid": "0", "log.dir": "/x", "zk.connect": "h:1",
                                      "enable.zookeeper": "false"})
    assert not c.uses_zookeeper


def test_unknown_keys_are_warned_and_ignored(caplog):
    with caplog.at_level(logging.WARNING):
        c = BrokerConfig.from_properties({"brokerid": "0", "log.dir": "/x", "no.such": "1"})
    assert c.broker_id == 0
    assert "no.such" in caplog.text


@pytest.mark.parametrize("props,key", [
    ({"log.dir": "/x"}, "brokerid"),
    ({"brokerid": "0"}, "log.dir"),
    ({"brokerid": "zero", "log.dir": "/x"}, "brokerid"),
    ({"brokerid": "0", "log.dir": "/x", "log.file.size": "4"}, "log.file.size"),
    ({"brokerid": "0", "log.dir": "/x", "num.partitions": "0"}, "num.partitions"),
    ({"brokerid": "0", "log.dir": "/x", "port": "70000"}, "port"),
    ({"brokerid": "0", "log.dir": "/x", "log.flush.interval": "0"}, "log.flush.interval"),
    ({"brokerid": "0", "log.dir": "/x", "topic.partition.count.map": "a:1,b"},
     "topic.partition.count.map"),
    ({"brokerid": "0", "log.dir": "/x", "topic.partition.count.map": "a:0"},
     "topic.partition.count.map"),
    ({"brokerid": "0", "log.dir": "/x", "enable.zookeeper": "maybe"}, "enable.zookeeper"),
    ({"brokerid": "0", "log.dir": "/x", "hostname": "fe80::1"}, "hostname"),
    ({"brokerid": "0", "log.dir": "/x", "max.message.size": "-1"}, "max.message.size"),
])
def test_bad_values_raise_configuration_error_naming_the_key(props, key):
    with pytest.raises(ConfigurationError, match=key.replace(".", r"\.")):
        BrokerConfig.from_properties(props)


def test_config_is_frozen_including_maps():
    c = BrokerConfig(broker_id=0, log_dir="/x", topic_partitions={"a": 2})
    with pytest.raises(AttributeError):
        c.port = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        c.topic_partitions["b"] = 3  # type: ignore[index]


def test_topic_map_parsing():
    assert parse_topic_map("", "k") == {}
    assert parse_topic_map("t1:8, t2 : 16", "k") == {"t1": 8, "t2": 16}
    assert parse_topic_map("with-dash:3", "k") == {"with-dash": 3}


def test_properties_grammar():
    text = ("! comment\n  # comment\nkey1=value with spaces  \nkey2 : v2\nkey3 v3\n"
            "multi = first \\\n      second\nesc=a\\tb\\u0041\\=\\:\nempty=\n"
            "key1=overridden\n")
    assert parse_properties(text) == {"key1": "overridden", "key2": "v2", "key3": "v3",
                                      "multi": "first second", "esc": "a\tbA=:",
                                      "empty": ""}


def test_cli_flags_override_the_properties_file(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("brokerid=1\nport=9092\nlog.dir=/from/file\nnum.partitions=3\n"
                     "log.flush.interval=100\n")
    parser = build_parser()
    args = parser.parse_args(["broker", "--config", str(props), "--port", "0",
                              "--num-partitions", "5", "--flush-ms", "250",
                              "--topic-partitions", "a:2", "--property",
                              "log.retention.size=1000", "--zk", "127.0.0.1:2181/c"])
    c = build_config(args)
    assert (c.broker_id, c.port, c.log_dir, c.num_partitions, c.flush_interval) == \
        (1, 0, "/from/file", 5, 100)
    assert c.flush_interval_ms == 250 and c.flush_scheduler_interval_ms == 250
    assert dict(c.topic_partitions) == {"a": 2} and c.log_retention_size == 1000
    assert c.zk_connect == "127.0.0.1:2181/c"


def test_cli_without_broker_id_fails_with_configuration_error(tmp_path):
    args = build_parser().parse_args(["broker", "--log-dir", str(tmp_path)])
    with pytest.raises(ConfigurationError, match="brokerid"):
        build_config(args)


@pytest.mark.parametrize("name", ["a", "with-dash", "dots.ok", "x" * 255, "under_score",
                                  "\u00e9t\u00e9"])
def test_topic_names_the_072_validator_accepts(name):
    validate_topic_name(name)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "x" * 256, "nl\n", "\x7f", "\x9f",
                                  "\ud800", "\uf8ff", "\ufff0", "\U0001f600"])
def test_topic_names_the_072_validator_rejects(name):
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


def test_max_topic_name_length_is_configurable():
    validate_topic_name("x" * 10, 10)
    with pytest.raises(InvalidTopicError):
        validate_topic_name("x" * 11, 10)


def test_log_dir_names_split_at_the_last_dash():
    assert parse_partition_dir("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir("t-0") == ("t", 0)
    assert parse_partition_dir("t--1") == ("t-", 1)
    for bad in ("nodash", "-0", "t-", "t-x", "t-\u0661"):
        assert parse_partition_dir(bad) is None
