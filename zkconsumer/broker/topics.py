"""Topic names exactly as the 0.7.2 broker treats them.

Job: the broker-side topic check (utils/TopicNameValidator.scala) with the configurable
``max.topic.name.length``.  The ``<topic>-<partition>`` directory naming (Utils.getTopicPartition)
is `zkconsumer.protocol.logformat`, shared with the log-directory reader.

Invariants
    * Lengths are Java ``String.length``: UTF-16 code units, so a character outside the BMP
      counts twice (and is rejected anyway: its surrogates fall in the illegal D800-F8FF range).
    * The broker does not impose the codec's ASCII-only rule: it mirrors what a 0.7.2 broker
      accepts, so a client that sends a name the reference accepts sees the same result.
"""

from __future__ import annotations

import re

from zkconsumer.errors import InvalidTopicError

__all__ = ["validate_topic_name"]

# "/", \u0000-\u001F, \u007F-\u009F, \uD800-\uF8FF, \uFFF0-\uFFFF, or a name of "." / "..";
# code points beyond the BMP are surrogate pairs in Java, hence illegal as well.
_ILLEGAL = re.compile("(^\\.{1,2}$)|[/\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")


def _java_length(s: str) -> int:
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)


def validate_topic_name(topic: str, max_length: int = 255) -> None:
    """Raise `InvalidTopicError` where TopicNameValidator.validate throws."""
    n = _java_length(topic)
    if n <= 0:
        raise InvalidTopicError("topic name is illegal, can't be empty")
    if n > max_length:
        raise InvalidTopicError(
            f"topic name is illegal, can't be longer than {max_length} characters")
    if _ILLEGAL.search(topic):
        raise InvalidTopicError(
            f"topic name {topic!r} is illegal, doesn't match expected regular expression")
