"""``zkconsumer mirror --from kafka://...`` argument handling (the bridge is tested end to end
in tests/integration/mirror/test_bridge*.py)."""

from __future__ import annotations

import argparse

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror import cli
from zkconsumer.mirror.bridge_cli import build_bridge_config
from zkconsumer.mirror.config import Partitioning


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(argv)


def test_the_issue_s_command_line() -> None:
    args = parse("--from", "kafka://h1:9092,h2:9092", "--group", "G", "--topic", "T",
                 "--topic", "U", "--to", "kafka07://zk:2181/k07", "--topic-map", "T:t07",
                 "--partitioning", "round-robin", "--set", "target.compression.codec=gzip",
                 "--set", "source.session.timeout.ms=6000", "--set", "mirror.poll.batch=9")
    config, source = build_bridge_config(args, cli._load_props(args))
    assert source.bootstrap == ("h1:9092", "h2:9092") and source.group == "G"
    assert source.topics == ("T", "U")
    assert source.options == {"session.timeout.ms": "6000"}
    assert config.target.zk_connect == "zk:2181/k07" and config.topic_map == {"T": "t07"}
    assert config.partitioning is Partitioning.ROUND_ROBIN and config.poll_batch == 9
    assert config.target_options == {"compression.codec": "gzip"}


@pytest.mark.parametrize(("argv", "message"), [
    (["--to", "kafka://h:1"], "kafka07://"),
    (["--to", "kafka07://zk", "--key-regex", "(x)", "--partitioning", "hash"], "--key-regex"),
    (["--to", "kafka07://zk", "--at-least-once"], "--at-least-once"),
    ([], "--to"),
])
def test_misuse_is_one_clear_error(argv: list[str], message: str) -> None:
    args = parse("--from", "kafka://h:1", "--group", "g", "--topic", "t", *argv)
    with pytest.raises(ConfigurationError, match=message):
        build_bridge_config(args, cli._load_props(args))


def test_a_group_and_topics_are_required() -> None:
    args = parse("--from", "kafka://h:1", "--topic", "t", "--to", "kafka07://zk")
    with pytest.raises(ConfigurationError, match="--group"):
        build_bridge_config(args, cli._load_props(args))
    args = parse("--from", "kafka://h:1", "--group", "g", "--to", "kafka07://zk")
    with pytest.raises(ConfigurationError, match="--topic"):
        build_bridge_config(args, cli._load_props(args))
    args = parse("--from", "kafka07://zk", "--group", "g", "--topic", "t", "--to",
                 "kafka07://zk")
    with pytest.raises(ConfigurationError, match="modern"):
        build_bridge_config(args, cli._load_props(args))
