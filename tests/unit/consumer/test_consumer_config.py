"""ConsumerConfig: 0.7 names, defaults, validation."""

from __future__ import annotations

import logging

import pytest

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.errors import ConfigurationError

BASE = {"groupid": "g", "zk.connect": "127.0.0.1:2181"}


def test_reference_defaults() -> None:
    c = ConsumerConfig.from_properties(BASE)
    assert (c.group_id, c.zk_connect, c.consumer_id) == ("g", "127.0.0.1:2181", None)
    assert c.socket_timeout_ms == 30000 and c.socket_buffersize == 65536
    assert c.fetch_size == 1048576 and c.fetcher_backoff_ms == 1000
    assert c.autocommit_enable is True and c.autocommit_interval_ms == 10000
    assert c.queuedchunks_max == 10 and c.rebalance_retries_max == 4
    assert c.rebalance_backoff_ms == 2000 and c.autooffset_reset == "smallest"
    assert c.consumer_timeout_ms == -1
    assert c.zk_session_timeout_ms == 6000 and c.zk_connection_timeout_ms == 6000
    assert c.auto_ack is True


def test_all_names() -> None:
    props = dict(BASE, **{
        "consumerid": "c1", "zk.sessiontimeout.ms": "4000", "zk.connectiontimeout.ms": "3000",
        "socket.timeout.ms": "100", "socket.buffersize": "1024", "fetch.size": "2048",
        "max.fetch.size": "4096", "fetcher.backoff.ms": "50", "autocommit.enable": "false",
        "autocommit.interval.ms": "60", "queuedchunks.max": "3", "rebalance.retries.max": "7",
        "rebalance.backoff.ms": "150", "autooffset.reset": "largest",
        "consumer.timeout.ms": "250", "shallowiterator.enable": "true", "auto.ack": "false",
        "num.streams": "2"})
    c = ConsumerConfig.from_properties(props)
    assert c.consumer_id == "c1" and c.zk_session_timeout_ms == 4000
    assert c.zk_connection_timeout_ms == 3000 and c.socket_timeout_ms == 100
    assert c.socket_buffersize == 1024 and c.fetch_size == 2048 and c.max_fetch_size == 4096
    assert c.fetcher_backoff_ms == 50 and c.autocommit_enable is False
    assert c.autocommit_interval_ms == 60 and c.queuedchunks_max == 3
    assert c.rebalance_retries_max == 7 and c.rebalance_backoff_ms == 150
    assert c.autooffset_reset == "largest" and c.consumer_timeout_ms == 250
    assert c.shallow_iterator_enable is True and c.auto_ack is False and c.num_streams == 2


def test_derived_defaults() -> None:
    c = ConsumerConfig.from_properties(dict(BASE, **{"zk.synctime.ms": "300",
                                                     "zk.sessiontimeout.ms": "9000"}))
    assert c.rebalance_backoff_ms == 300          # = zk.synctime.ms
    assert c.zk_connection_timeout_ms == 9000     # = zk.sessiontimeout.ms
    c = ConsumerConfig.from_properties(dict(BASE, **{"backoff.increment.ms": "77"}))
    assert c.fetcher_backoff_ms == 77             # 0.7.0 name
    c = ConsumerConfig.from_properties(dict(BASE, **{"backoff.increment.ms": "77",
                                                     "fetcher.backoff.ms": "88"}))
    assert c.fetcher_backoff_ms == 88


def test_overrides_use_python_names() -> None:
    c = ConsumerConfig.from_properties(BASE, fetch_size=10, rebalance_backoff_ms=5)
    assert c.fetch_size == 10 and c.rebalance_backoff_ms == 5
    with pytest.raises(ConfigurationError):
        ConsumerConfig.from_properties(BASE, no_such_field=1)


@pytest.mark.parametrize(("key", "value", "match"), [
    ("autooffset.reset", "anything", "autooffset.reset"),
    ("fetch.size", "abc", "fetch.size"),
    ("fetch.size", "0", "fetch.size"),
    ("autocommit.enable", "yes", "autocommit.enable"),
    ("queuedchunks.max", "-1", "queuedchunks.max"),
    ("max.fetch.size", "10", "fetch.size"),
    ("groupid", "", "groupid"),
    ("groupid", "a/b", "groupid"),
])
def test_invalid_values(key: str, value: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        ConsumerConfig.from_properties(dict(BASE, **{key: value}))


def test_required_keys() -> None:
    with pytest.raises(ConfigurationError, match="groupid"):
        ConsumerConfig.from_properties({"zk.connect": "x:1"})
    with pytest.raises(ConfigurationError, match=r"zk\.connect"):
        ConsumerConfig.from_properties({"groupid": "g"})


def test_unknown_and_mirror_keys_warn(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="zkconsumer.consumer.config"):
        c = ConsumerConfig.from_properties(dict(BASE, **{
            "serializer.class": "x", "group.id": "other", "mirror.topics.whitelist": "a"}))
    assert c.group_id == "g"
    text = caplog.text
    assert "serializer.class" in text and "group.id (0.7 name: groupid)" in text
    assert "mirror.topics.whitelist" in text


def test_frozen_and_replace() -> None:
    c = ConsumerConfig("g", "z:1")
    with pytest.raises(AttributeError):
        c.group_id = "x"  # type: ignore[misc]
    assert c.replace(fetch_size=5).fetch_size == 5
    with pytest.raises(ConfigurationError):
        c.replace(autooffset_reset="earliest")
