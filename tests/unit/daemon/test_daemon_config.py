"""``zkconsumer run`` configuration: properties file, --set, sinks, clear errors."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.daemon import cli
from zkconsumer.daemon.config import CONSUMER_KEYS, build_config, parse_set, parse_topic
from zkconsumer.errors import ConfigurationError


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(list(argv))


def test_minimal_flags() -> None:
    cfg = build_config(_args("--zk", "h:2181/c", "--group", "g", "--topic", "a",
                             "--topic", "b:3", "--output", "out.txt"))
    assert cfg.consumer.zk_connect == "h:2181/c" and cfg.consumer.group_id == "g"
    assert cfg.subscription.topics == {"a": 1, "b": 3}
    assert cfg.sink == "output" and cfg.target == "out.txt" and cfg.format == "lines"
    # the daemon acknowledges and commits itself
    assert cfg.consumer.auto_ack is False and cfg.consumer.autocommit_enable is False
    assert cfg.commit_interval == 10.0
    assert cfg.exec_max_restarts == 10


def test_properties_file_and_set(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    props = tmp_path / "consumer.properties"
    props.write_text("# a Scala consumer's file\n"
                     "zk.connect=zk1:2181,zk2:2181/kafka\n"
                     "groupid=scala-group\n"
                     "autocommit.interval.ms=2500\n"
                     "fetch.size=2097152\n"
                     "serializer.class=kafka.serializer.StringEncoder\n")
    with caplog.at_level(logging.WARNING):
        cfg = build_config(_args("--config", str(props), "--set", "fetch.size=4096",
                                 "--whitelist", "ev.*", "--streams", "2",
                                 "--exec", "cat", "--format", "jsonl"))
    assert "serializer.class" in caplog.text  # unknown file keys: a warning, not an error
    assert cfg.consumer.group_id == "scala-group"
    assert cfg.consumer.zk_connect == "zk1:2181,zk2:2181/kafka"
    assert cfg.consumer.fetch_size == 4096  # --set wins over the file
    assert cfg.commit_interval == 2.5
    assert cfg.subscription.whitelist == "ev.*" and cfg.subscription.num_streams == 2
    # flags win over the file
    cfg2 = build_config(_args("--config", str(props), "--group", "other", "--topic", "t",
                              "--output", "-"))
    assert cfg2.consumer.group_id == "other"


def test_autocommit_disabled_means_commit_on_rebalance_and_shutdown_only() -> None:
    cfg = build_config(_args("--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-",
                             "--set", "autocommit.enable=false"))
    assert cfg.commit_interval is None


@pytest.mark.parametrize("argv, message", [
    (["--group", "g", "--topic", "t", "--output", "-"], "--zk"),
    (["--zk", "h:1", "--topic", "t", "--output", "-"], "--group"),
    (["--zk", "h:1", "--group", "g", "--output", "-"], "--topic"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--whitelist", "x", "--output", "-"],
     "not --topic and --whitelist"),
    (["--zk", "h:1", "--group", "g", "--topic", "t:0", "--output", "-"], "STREAMS"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--format", "binary"],
     "does not apply to --output"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--exec", "cat", "--format", "raw"],
     "does not apply to --exec"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--handler", "m:f", "--format", "lines"],
     "--format applies"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--dead-letter", "x"],
     "need --handler"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--set", "fetch.sise=1"],
     "did you mean fetch.size"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--set", "nokey"],
     "key=value"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--set",
      "autooffset.reset=earliest"], "autooffset.reset"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--batch-size", "0"],
     "--batch-size"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-",
      "--shutdown-timeout", "0"], "--shutdown-timeout"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--exec", "cat",
      "--exec-max-restarts", "-1"], "--exec-max-restarts must be >= 0"),
    (["--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--config",
      "/nonexistent/consumer.properties"], "cannot read properties file"),
])
def test_bad_config_is_a_clear_error(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        build_config(_args(*argv))


def test_parse_helpers() -> None:
    assert parse_topic("a", 2) == ("a", 2)
    assert parse_topic("a:5", 2) == ("a", 5)
    assert parse_set(["fetch.size = 10", "groupid=g=x"]) == {"fetch.size": "10",
                                                             "groupid": "g=x"}


def test_every_set_key_is_understood_by_the_consumer_config(
        caplog: pytest.LogCaptureFixture) -> None:
    """--set accepts exactly keys ConsumerConfig.from_properties knows (no 'unknown' warning)."""
    values = {"groupid": "g", "zk.connect": "h:1", "consumerid": "c1",
              "autocommit.enable": "true", "autooffset.reset": "largest",
              "shallowiterator.enable": "false", "consumer.timeout.ms": "-1"}
    props = {k: values.get(k, "4096") for k in CONSUMER_KEYS}
    props["max.fetch.size"] = str(64 * 1024 * 1024)
    with caplog.at_level(logging.WARNING):
        ConsumerConfig.from_properties(props)
    assert "unknown" not in caplog.text


def test_argparse_requires_exactly_one_sink(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _args("--zk", "h:1", "--group", "g", "--topic", "t")
    assert "one of the arguments --output --exec --handler is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _args("--zk", "h:1", "--group", "g", "--topic", "t", "--output", "-", "--exec", "cat")


def test_json_log_format(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    record = logging.LogRecord("zkconsumer.daemon", logging.INFO, "f", 1, "hello %s",
                               ("world",), None)
    record.event = "rebalance_assign"
    record.partitions = {"t": ["0-0"]}
    obj = json.loads(cli.JsonFormatter().format(record))
    assert obj["message"] == "hello world" and obj["event"] == "rebalance_assign"
    assert obj["partitions"] == {"t": ["0-0"]} and obj["level"] == "INFO"
    text = cli.TextFormatter().format(record)
    assert "hello world" in text and "event=rebalance_assign" in text
