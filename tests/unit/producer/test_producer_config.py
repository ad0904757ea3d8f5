"""ProducerConfig: 0.7 property names, defaults, validation naming the key."""

from __future__ import annotations

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.producer.config import ProducerConfig, StaticBroker, parse_codec
from zkconsumer.protocol import Compression


def test_defaults_follow_0_7_except_documented_retries() -> None:
    cfg = ProducerConfig(zk_connect="127.0.0.1:2181")
    assert cfg.producer_type == "sync"
    assert cfg.compression_codec == Compression.NONE
    assert (cfg.batch_size, cfg.queue_time_ms, cfg.queue_size) == (200, 5000, 10000)
    assert cfg.enqueue_timeout_ms == 0
    assert cfg.max_message_size == 1000000
    assert cfg.reconnect_interval == 30000
    assert (cfg.connect_timeout_ms, cfg.socket_timeout_ms, cfg.buffer_size) == (5000, 30000,
                                                                               102400)
    assert cfg.num_retries == 3  # ours; 0.7 used 0
    assert cfg.partitioner == "hash"


def test_from_properties_reads_0_7_names() -> None:
    cfg = ProducerConfig.from_properties({
        "zk.connect": "127.0.0.1:2181/kafka",
        "producer.type": "async",
        "compression.codec": "1",
        "compressed.topics": "a, b",
        "batch.size": "50",
        "queue.time": "100",
        "queue.size": "7",
        "queue.enqueueTimeout.ms": "-1",
        "max.message.size": "2000",
        "reconnect.interval": "5",
        "connect.timeout.ms": "100",
        "socket.timeout.ms": "200",
        "buffer.size": "300",
        "num.retries": "0",
        "zk.read.num.retries": "1",
        "zk.sessiontimeout.ms": "4000",
        "partitioner.class": "kafka.producer.DefaultPartitioner",
        "serializer.class": "kafka.serializer.DefaultEncoder",
        "confirm": "true",
        "retry.backoff.ms": "5",
    })
    assert cfg.zk_connect == "127.0.0.1:2181/kafka"
    assert cfg.producer_type == "async"
    assert cfg.compression_codec == Compression.GZIP
    assert cfg.compressed_topics == frozenset({"a", "b"})
    assert (cfg.batch_size, cfg.queue_time_ms, cfg.queue_size, cfg.enqueue_timeout_ms) == (
        50, 100, 7, -1)
    assert cfg.max_message_size == 2000 and cfg.reconnect_interval == 5
    assert cfg.num_retries == 0 and cfg.zk_read_num_retries == 1
    # zk.connectiontimeout.ms defaults to the session timeout, as in ZKConfig
    assert cfg.zk_session_timeout_ms == cfg.zk_connection_timeout_ms == 4000
    assert cfg.partitioner == "hash" and cfg.confirm is True and cfg.retry_backoff_ms == 5


@pytest.mark.parametrize("value,codec", [("0", 0), ("1", 1), ("2", 2), ("none", 0),
                                         ("GZIP", 1), ("snappy", 2)])
def test_codec_names_and_numbers(value: str, codec: int) -> None:
    assert parse_codec(value) == Compression(codec)
    cfg = ProducerConfig.from_properties({"broker.list": "0:h:1", "compression.codec": value})
    assert cfg.compression_codec == Compression(codec)


def test_codec_for_honours_compressed_topics() -> None:
    everything = ProducerConfig(broker_list="0:h:1", compression_codec=Compression.SNAPPY)
    assert everything.codec_for("x") == Compression.SNAPPY
    some = everything.replace(compressed_topics=frozenset({"a"}))
    assert some.codec_for("a") == Compression.SNAPPY and some.codec_for("b") == Compression.NONE
    off = ProducerConfig(broker_list="0:h:1", compressed_topics=frozenset({"a"}))
    assert off.codec_for("a") == Compression.NONE


def test_broker_list_parsed() -> None:
    cfg = ProducerConfig(broker_list="1:127.0.0.1:9092, 0:localhost:9093")
    assert cfg.static_brokers == (StaticBroker(1, "127.0.0.1", 9092),
                                  StaticBroker(0, "localhost", 9093))


@pytest.mark.parametrize("props,key", [
    ({}, "zk.connect"),
    ({"zk.connect": "z:1", "broker.list": "0:h:1"}, "zk.connect"),
    ({"broker.list": "0:h"}, "broker.list"),
    ({"broker.list": "0:h:1,0:g:2"}, "broker.list"),
    ({"broker.list": "x:h:1"}, "broker.list"),
    ({"broker.list": "0:h:70000"}, "broker.list"),
    ({"broker.list": "0:h:1", "partitioner.class": "kafka.producer.DefaultPartitioner"},
     "partitioner.class"),
    ({"zk.connect": "z:1", "partitioner.class": "com.example.Mine"}, "partitioner.class"),
    ({"zk.connect": "z:1", "producer.type": "fast"}, "producer.type"),
    ({"zk.connect": "z:1", "compression.codec": "3"}, "compression.codec"),
    ({"zk.connect": "z:1", "compression.codec": "lz4"}, "compression.codec"),
    ({"zk.connect": "z:1", "batch.size": "0"}, "batch.size"),
    ({"zk.connect": "z:1", "queue.size": "many"}, "queue.size"),
    ({"zk.connect": "z:1", "num.retries": "-1"}, "num.retries"),
    ({"zk.connect": "z:1", "confirm": "perhaps"}, "confirm"),
    ({"zk.connect": "z:1", "serializer.class": "com.example.Encoder"}, "serializer.class"),
    ({"zk.connect": "z:1", "callback.handler": "com.example.Cb"}, "callback.handler"),
])
def test_invalid_values_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigurationError, match=key.replace(".", r"\.")):
        ProducerConfig.from_properties(props)


def test_unknown_keys_rejected_with_the_known_list() -> None:
    with pytest.raises(ConfigurationError) as info:
        ProducerConfig.from_properties({"zk.connect": "z:1", "compresion.codec": "1"})
    text = str(info.value)
    assert "compresion.codec" in text and "known:" in text and "compression.codec" in text


def test_keyword_construction_validates_too() -> None:
    with pytest.raises(ConfigurationError, match="partitioner"):
        ProducerConfig(zk_connect="z:1", partitioner="sticky")
    with pytest.raises(ConfigurationError, match="unknown producer setting"):
        ProducerConfig(zk_connect="z:1").replace(bogus=1)
    with pytest.raises(ConfigurationError, match=r"queue\.enqueueTimeout\.ms"):
        ProducerConfig(zk_connect="z:1", enqueue_timeout_ms=1.5)  # type: ignore[arg-type]
