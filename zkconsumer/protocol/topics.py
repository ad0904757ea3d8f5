"""Topic-name validation: what the 0.7.2 broker accepts, narrowed to names 0.7 can frame.

Rules (REFERENCE §4.6, utils/TopicNameValidator.scala): non-empty, at most 255 characters, not
``.`` or ``..``, no ``/``, none of ``\\u0000-\\u001f``, ``\\u007f-\\u009f``, ``\\ud800-\\uf8ff``,
``\\ufff0-\\uffff``.  On top of that the name must be ASCII: 0.7 frames strings by their UTF-16
length but writes UTF-8 bytes, so any non-ASCII name misframes every request carrying it.

Note that a real broker needs ``<topic>-<partition>`` to fit in a 255-byte file name, so 253
characters is the longest *usable* name; that is a broker storage limit, not a wire rule, and
is not enforced here.
"""

from __future__ import annotations

import re

from zkconsumer.errors import InvalidTopicError

__all__ = ["MAX_TOPIC_LENGTH", "validate_topic"]

MAX_TOPIC_LENGTH = 255
_ILLEGAL = re.compile("[/\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


def validate_topic(name: str) -> None:
    """Raise `InvalidTopicError` (with the reason) unless ``name`` is a legal 0.7 topic."""
    if not isinstance(name, str):
        raise InvalidTopicError(f"topic must be a str, not {type(name).__name__}")
    if not name:
        raise InvalidTopicError("topic name is empty")
    if len(name) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic name is {len(name)} characters, longer than {MAX_TOPIC_LENGTH}")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed")
    bad = _ILLEGAL.search(name)
    if bad is not None:
        raise InvalidTopicError(
            f"topic name {name!r} contains the illegal character {bad.group()!r}")
    if not name.isascii():
        raise InvalidTopicError(
            f"topic name {name!r} is not ASCII (Kafka 0.7 misframes non-ASCII strings)")
