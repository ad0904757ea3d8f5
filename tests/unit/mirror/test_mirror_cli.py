"""``zkconsumer mirror`` argument handling (the run itself is tested end to end)."""

from __future__ import annotations

import argparse

import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror import cli


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    return parser.parse_args(argv)


def test_run_flags_and_subscription() -> None:
    args = parse("--zk", "z:1/c", "--group", "g", "--topic", "a", "--topic", "b:3",
                 "--to", "kafka://h:1", "--partitioning", "hash", "--key-regex", "(x)")
    assert args.mirror_command is None
    sub = cli._subscription(args)
    assert sub.topics == {"a": 1, "b": 3}
    assert cli._target(args).bootstrap == ("h:1",)
    wl = cli._subscription(parse("--whitelist", "logs.*", "--num-streams", "2"))
    assert (wl.whitelist, wl.num_streams) == ("logs.*", 2)
    with pytest.raises(ConfigurationError, match="--topic"):
        cli._subscription(parse("--zk", "z"))
    with pytest.raises(ConfigurationError, match="TOPIC"):
        cli._subscription(parse("--topic", "a:x"))
    with pytest.raises(SystemExit):
        parse("--topic", "a", "--whitelist", "b")  # exactly one selector


def test_properties_merge_file_then_set_then_flags(tmp_path) -> None:
    conf = tmp_path / "mirror.properties"
    conf.write_text("groupid=from-file\nzk.connect=zk-file\nmirror.max.in.flight=5\n"
                    "target.linger.ms=7\n")
    args = parse("--config", str(conf), "--set", "mirror.max.in.flight=9", "--group", "flag")
    props = cli._load_props(args)
    assert props["groupid"] == "flag" and props["zk.connect"] == "zk-file"
    assert props["mirror.max.in.flight"] == "9" and props["target.linger.ms"] == "7"
    with pytest.raises(ConfigurationError, match="key=value"):
        cli._load_props(parse("--set", "novalue"))
    with pytest.raises(ConfigurationError, match="missing"):
        cli._load_props(parse("--config", str(tmp_path / "missing")))


def test_verify_subcommand() -> None:
    args = parse("verify", "--zk", "z", "--group", "g", "--to", "kafka07://z2/c",
                 "--payloads", "--allow-duplicates", "--method", "offsets")
    assert args.mirror_command == "verify"
    assert (args.payloads, args.allow_duplicates, args.method) == (True, True, "offsets")
    assert cli._target(args).zk_connect == "z2/c"
    with pytest.raises(ConfigurationError, match="--to"):
        cli._target(parse("verify"))
