"""MirrorConfig, TargetSpec, topic maps, property splitting and target option conversion."""

from __future__ import annotations

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror.config import (
    MirrorConfig,
    Partitioning,
    TargetSpec,
    parse_topic_map,
    split_properties,
)
from zkconsumer.mirror.targets import kafka_producer_options

KAFKA = TargetSpec.parse("kafka://127.0.0.1:9092")


def test_target_spec_parses_both_schemes() -> None:
    t = TargetSpec.parse("kafka://a:1,b.example:9092")
    assert (t.kind, t.bootstrap, str(t)) == ("kafka", ("a:1", "b.example:9092"),
                                           "kafka://a:1,b.example:9092")
    z = TargetSpec.parse("kafka07://zk1:2181,zk2:2181/chroot")
    assert (z.kind, z.zk_connect) == ("kafka07", "zk1:2181,zk2:2181/chroot")


@pytest.mark.parametrize("url", ["127.0.0.1:9092", "kafka://", "kafka://host", "kafka://h:0",
                                 "kafka://h:99999", "http://h:1", "kafka07://"])
def test_target_spec_rejects(url: str) -> None:
    with pytest.raises(ConfigurationError):
        TargetSpec.parse(url)


def test_topic_map() -> None:
    assert parse_topic_map("a:b, c:d,") == {"a": "b", "c": "d"}
    assert parse_topic_map("a:x,b:x") == {"a": "x", "b": "x"}  # merge is allowed
    assert parse_topic_map(None) == {}
    for bad in ("a", "a:", ":b", "a:b,a:c", "a:bad/name", "a:" + "x" * 250):
        with pytest.raises(ConfigurationError):
            parse_topic_map(bad)


def test_defaults_and_validation() -> None:
    c = MirrorConfig(target=KAFKA)
    assert c.partitioning is Partitioning.PRESERVE and c.max_in_flight == 10000
    assert MirrorConfig(target=KAFKA, partitioning="hash").partitioning is Partitioning.HASH  # type: ignore[arg-type]
    bad = [
        dict(partitioning="sticky"),
        dict(key_regex="(x"),
        dict(key_regex="no-group"),
        dict(key_regex="(k)"),  # only with hash
        dict(create_topics=True),  # needs --partitions
        dict(partitions=0),
        dict(max_in_flight=0),
        dict(commit_interval_ms=-1),
        dict(retry_backoff_ms=1000, retry_backoff_max_ms=10),
        dict(metrics_port=70000),
        dict(topic_map={"a": "b/c"}),
        dict(startup_timeout=0),  # --startup-timeout: > 0, or no limit (None, the default)
    ]
    for kwargs in bad:
        with pytest.raises(ConfigurationError):
            MirrorConfig(target=KAFKA, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="kafka://"):
        MirrorConfig(target=TargetSpec.parse("kafka07://zk:1"), create_topics=True, partitions=2)
    ok = MirrorConfig(target=KAFKA, partitioning=Partitioning.HASH, key_regex=r"id=(\d+)")
    pattern = ok.key_pattern()
    assert pattern is not None and pattern.search(b"id=42").group(1) == b"42"  # type: ignore[union-attr]


def test_properties_split_by_prefix_and_mirror_keys_convert() -> None:
    consumer, mirror, target = split_properties({
        "groupid": "g", "zk.connect": "z", "mirror.max.in.flight": "7",
        "mirror.topics.whitelist": "x",  # 0.7.0's key: the consumer warns about it
        "target.linger.ms": "3", "target.compression.type": "gzip"})
    assert consumer == {"groupid": "g", "zk.connect": "z", "mirror.topics.whitelist": "x"}
    assert mirror == {"max.in.flight": "7"}
    assert target == {"linger.ms": "3", "compression.type": "gzip"}
    c = MirrorConfig.from_properties(KAFKA, mirror, target, partitioning="round-robin")
    assert c.max_in_flight == 7 and c.target_options == target
    with pytest.raises(ConfigurationError, match=r"mirror\.max\.in\.flight"):
        MirrorConfig.from_properties(KAFKA, {"max.in.flight": "lots"}, {})
    with pytest.raises(ConfigurationError, match=r"mirror\.nope"):
        MirrorConfig.from_properties(KAFKA, {"nope": "1"}, {})


def test_target_options_are_checked_librdkafka_properties() -> None:
    got = kafka_producer_options({"linger.ms": "3", "compression.type": "gzip",
                                  "enable.idempotence": "false", "request.timeout.ms": "1000",
                                  "client.id": "x"})
    assert got == {"linger.ms": "3", "compression.type": "gzip", "enable.idempotence": "false",
                   "request.timeout.ms": "1000", "client.id": "x"}
    with pytest.raises(ConfigurationError, match="No such configuration property"):
        kafka_producer_options({"lingr.ms": "1"})
    with pytest.raises(ConfigurationError, match="librdkafka says"):
        kafka_producer_options({"compression.type": "zip"})
    with pytest.raises(ConfigurationError, match="set by the mirror"):
        kafka_producer_options({"bootstrap.servers": "h:1"})


def test_build_mirror_refuses_the_shallow_iterator() -> None:
    from zkconsumer.consumer.config import ConsumerConfig
    from zkconsumer.consumer.subscription import Subscription
    from zkconsumer.mirror.runner import build_mirror

    ccfg = ConsumerConfig(group_id="g", zk_connect="127.0.0.1:1", shallow_iterator_enable=True)
    with pytest.raises(ConfigurationError, match="shallowiterator"):
        build_mirror(MirrorConfig(target=KAFKA), ccfg, Subscription.of("t"))
