"""Subscription -> ids znode value (byte for byte as Scala) and thread ids."""

from __future__ import annotations

import pytest

from zkconsumer.consumer.subscription import Subscription
from zkconsumer.errors import ConfigurationError


def test_static_registration_is_scala_bytes() -> None:
    assert Subscription(topics={"t1": 2, "t2": 1}).registration() == b'{ "t1": 2,"t2": 1 }'
    assert Subscription.of("topic1").registration() == b'{ "topic1": 1 }'


def test_wildcard_registration_normalised_like_topicfilter() -> None:
    assert Subscription(whitelist=" white, topic.* ", num_streams=4).registration() == \
        b"*4*white|topic.*"
    assert Subscription(blacklist='"black.*"', num_streams=2).registration() == b"!2!black.*"


def test_thread_ids() -> None:
    s = Subscription(topics={"a": 3, "b": 1})
    assert s.thread_ids("g_c") == {"a": ["g_c-0", "g_c-1", "g_c-2"], "b": ["g_c-0"]}
    w = Subscription(whitelist="a.*", num_streams=2)
    assert w.thread_ids("g_c", ["ab", "b", "a"]) == {"ab": ["g_c-0", "g_c-1"],
                                                     "a": ["g_c-0", "g_c-1"]}
    # full match, like Java String.matches
    assert w.topic_streams(["xab"]) == {}
    b = Subscription(blacklist="a.*")
    assert b.topic_streams(["ab", "b"]) == {"b": 1}


@pytest.mark.parametrize("kwargs", [
    {}, {"topics": {"a": 1}, "whitelist": "x"}, {"whitelist": "x", "blacklist": "y"},
    {"topics": {"a": 0}}, {"whitelist": "("}, {"whitelist": "  "}, {"whitelist": "a", "num_streams": 0},
])
def test_invalid(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Subscription(**kwargs)  # type: ignore[arg-type]


def test_copy_of_topics() -> None:
    topics = {"a": 1}
    s = Subscription(topics=topics)
    topics["b"] = 1
    assert s.topic_streams() == {"a": 1}
