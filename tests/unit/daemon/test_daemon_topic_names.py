"""``zkconsumer run`` holds ``--topic`` to the rules ``produce`` and ``fetch`` apply (issue 11).

``--topic ..`` used to end in "unexpected ValueError ... (a bug: please report it)", and
``a/b``, ``tëst`` or a 300-character name registered and waited forever.  Now each is one line
and exit status 2, like any other bad flag, before anything connects (the ``--zk`` below
points nowhere: a test that tried to connect would take the connection timeout).
"""

from __future__ import annotations

import argparse

import pytest

from zkconsumer.cli import main
from zkconsumer.daemon import cli
from zkconsumer.daemon.config import build_config, parse_topic
from zkconsumer.errors import UsageError
from zkconsumer.zk.topic_count import TopicCount

NOWHERE = "127.0.0.1:1"


def _run(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, list[str]]:
    status = main(["run", "--zk", NOWHERE, "--group", "g", "--output", "-", *flags])
    return status, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("topic,detail", [
    ("..", "topic name '..' is not allowed"),
    (".", "topic name '.' is not allowed"),
    ("a/b", "topic name 'a/b' contains the illegal character '/'"),
    ("tëst", "topic name 'tëst' is not ASCII"),
    ("x" * 300, "topic name is 300 characters, longer than 255"),
    ("a\tb", "contains the illegal character '\\t'"),
    ('a"b', "a quote or a backslash cannot be registered"),
    ("a\\b", "a quote or a backslash cannot be registered"),
    (":2", "expected TOPIC or TOPIC:STREAMS (>= 1)"),
    ("t:0", "expected TOPIC or TOPIC:STREAMS (>= 1)"),
    ("t:x", "expected TOPIC or TOPIC:STREAMS"),
    ("../x:2", "contains the illegal character '/'"),
    ("", "topic name is empty"),
], ids=lambda v: repr(v)[:20])
def test_bad_topic_is_one_usage_line(capsys: pytest.CaptureFixture[str], topic: str,
                                     detail: str) -> None:
    status, err = _run(capsys, "--topic", topic)
    assert status == 2
    assert len(err) == 1, err
    assert err[0].startswith(f"zkconsumer run: error: --topic {topic!r}: ")
    assert detail in err[0]
    assert "unexpected" not in err[0]


@pytest.mark.parametrize("flag,regex", [("--whitelist", "'\"\"'"), ("--blacklist", "\"''\""),
                                        ("--whitelist", "a(")])
def test_unusable_filter_is_one_usage_line(capsys: pytest.CaptureFixture[str], flag: str,
                                           regex: str) -> None:
    status, err = _run(capsys, flag, regex)
    assert status == 2
    assert len(err) == 1 and err[0].startswith(f"zkconsumer run: error: {flag} {regex!r}: ")


def test_good_names_pass() -> None:
    assert parse_topic("events", 1) == ("events", 1)
    assert parse_topic("web.access_log-2:3", 1) == ("web.access_log-2", 3)
    assert parse_topic("x" * 255, 2) == ("x" * 255, 2)
    parser = argparse.ArgumentParser()
    cli.configure(parser)
    cfg = build_config(parser.parse_args(["--zk", NOWHERE, "--group", "g", "--output", "-",
                                          "--whitelist", " 'logs-.*, audit' "]))
    assert cfg.subscription.topic_count.pattern == "logs-.*|audit"


def test_empty_normalised_filter_is_refused_where_it_is_built() -> None:
    with pytest.raises(ValueError, match="empty once normalised"):
        TopicCount.wildcard(True, 1, "'\"'")
    with pytest.raises(UsageError):
        parse_topic("..", 1)
