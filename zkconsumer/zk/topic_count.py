"""Consumer ids, thread ids and ``TopicCount``: the value of ``/consumers/<g>/ids/<cid>``.

Invariants:

* `TopicCount.db_string` is byte-for-byte Scala's ``dbString``: ``{ "t1": 2,"t2": 1 }`` for a
  static subscription (caller's order, which is Scala's small-map insertion order) and
  ``*N*regex`` / ``!N!regex`` for a whitelist / blacklist.
* `parse_topic_count` reads what every 0.7 consumer writes (any JSON object of integers, or a
  wildcard) and raises `ZnodeDataError` on anything else, because a value Scala cannot
  parse breaks every member's rebalance.
* Thread ids are ``<consumerId>-<i>``; they are the owner-znode values.

Re-exported by `zkconsumer.zk.paths`, which is where callers import them from.
"""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import overload

from zkconsumer.errors import ConfigurationError, LocalProtocolError, ZnodeDataError
from zkconsumer.zk._codec import INT_MAX, decimal_value, text_value

__all__ = [
    "TopicCount",
    "make_consumer_id",
    "normalize_topic_filter",
    "parse_topic_count",
    "thread_ids",
]

# --------------------------------------------------------------------------------------------
# Consumer ids and thread ids (ZookeeperConsumerConnector.consumerIdString, TopicCount)
# --------------------------------------------------------------------------------------------


def make_consumer_id(group: str, host: str | None = None, now_ms: int | None = None,
                     uuid_hex: str | None = None) -> str:
    """``group_host-millis-xxxxxxxx`` exactly as Scala builds it.

    Scala takes ``uuid.getMostSignificantBits().toHexString.substring(0, 8)``: Java's
    ``toHexString`` drops leading zero nibbles first, so the 8 chars start at the first
    non-zero nibble of the high 64 bits.  ``uuid_hex`` is the full 32-hex-digit UUID (default:
    a fresh ``uuid4``); host defaults to the local host name, like
    ``InetAddress.getLocalHost.getHostName``.
    """
    if host is None:
        host = socket.gethostname()
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    if uuid_hex is None:
        uuid_hex = uuid.uuid4().hex
    try:
        msb = int(uuid.UUID(hex=uuid_hex).hex[:16], 16)
    except ValueError as exc:
        raise ConfigurationError(f"uuid_hex: not a UUID: {uuid_hex!r}") from exc
    # substring(0, 8) would throw for fewer than 8 significant nibbles; a random UUID (its
    # version nibble is non-zero) always has at least 13, so just take what there is.
    return f"{group}_{host}-{now_ms}-{format(msb, 'x')[:8]}"


@overload
def thread_ids(consumer_id: str, n: int) -> list[str]: ...


@overload
def thread_ids(consumer_id: str, n: Mapping[str, int]) -> dict[str, list[str]]: ...


def thread_ids(consumer_id: str, n: int | Mapping[str, int]) -> list[str] | dict[str, list[str]]:
    """Thread ids ``<consumerId>-<i>`` for ``i in range(n)``.

    With a ``{topic: n}`` mapping, returns ``{topic: [ids...]}``
    (TopicCount.makeConsumerThreadIdsPerTopic).  These strings are the owner-znode values.
    """
    if isinstance(n, Mapping):
        return {topic: [f"{consumer_id}-{i}" for i in range(count)] for topic, count in n.items()}
    return [f"{consumer_id}-{i}" for i in range(n)]


# --------------------------------------------------------------------------------------------
# TopicCount: the value of /consumers/<g>/ids/<consumerId>
# --------------------------------------------------------------------------------------------

_WHITELIST_MARKER = "*"
_BLACKLIST_MARKER = "!"
# TopicCount.WHITELIST_PATTERN / BLACKLIST_PATTERN; \p{Digit} is ASCII in Java by default.
# Java's "." also stops at \r, \u0085, \u2028, \u2029 while Python's stops only at \n: a
# regex containing those would be rejected by Scala's matcher but accepted here.
_WILDCARD = re.compile(r"([*!])([0-9]+)\1(.*)")
# Java String.trim strips every char <= U+0020.
_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))
_LEADING_QUOTES = re.compile(r"^[\"']+")
_TRAILING_QUOTES = re.compile(r"[\"']+$")


def normalize_topic_filter(raw: str) -> str:
    """A whitelist/blacklist regex normalised as Scala's TopicFilter does.

    Trim, turn ``,`` into ``|``, drop every space, strip leading and trailing quotes
    ("property files may bring quotes").  Idempotent, so re-normalising a value read back
    from ZooKeeper changes nothing.
    """
    regex = raw.strip(_JAVA_WHITESPACE).replace(",", "|").replace(" ", "")
    regex = _LEADING_QUOTES.sub("", regex)
    return _TRAILING_QUOTES.sub("", regex)


@dataclass(frozen=True, slots=True)
class TopicCount:
    """What a consumer subscribes to: static ``{topic: streams}`` or a wildcard filter.

    ``counts`` keeps the caller's order, because the encoded string must follow Scala's map
    iteration order, which for the small immutable maps Scala builds (<= 4 entries) is
    insertion order.  For a wildcard, ``counts`` is empty and ``pattern`` holds the normalised
    regex, matched with `re.fullmatch` like Java's ``String.matches``.  Java and Python regex
    dialects differ (possessive quantifiers, ``\\p{...}`` classes, ...): a Java-only regex
    read from ZooKeeper raises `ZnodeDataError`.
    """

    counts: tuple[tuple[str, int], ...] = ()
    pattern: str | None = None
    whitelist: bool = True
    num_streams: int = 0

    @classmethod
    def static(cls, counts: Mapping[str, int] | Iterable[tuple[str, int]]) -> TopicCount:
        items = tuple(counts.items() if isinstance(counts, Mapping) else counts)
        for topic, n in items:
            if not isinstance(topic, str) or not topic:
                raise ConfigurationError(f"topic count: topic must be a non-empty str: {topic!r}")
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= INT_MAX:
                raise ConfigurationError(f"topic count: streams for {topic!r} must be >= 1: {n!r}")
        return cls(counts=items)

    @classmethod
    def wildcard(cls, whitelist: bool, n: int, regex: str) -> TopicCount:
        """``*n*regex`` (whitelist) or ``!n!regex`` (blacklist); the regex is normalised."""
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= INT_MAX:
            raise ConfigurationError(f"topic filter: number of streams must be >= 1: {n!r}")
        pattern = normalize_topic_filter(regex)
        if not pattern:
            # e.g. '""' (quotes are stripped) would register "*1*" (matching nothing) or "!1!"
            # (matching everything): never what was meant.
            raise ConfigurationError(f"topic filter: {regex!r} is empty once normalised "
                                     "(quotes, spaces and commas removed)")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigurationError(f"topic filter: {pattern!r} is an invalid regex") from exc
        return cls(pattern=pattern, whitelist=whitelist, num_streams=n)

    @property
    def is_wildcard(self) -> bool:
        return self.pattern is not None

    def allows(self, topic: str) -> bool:
        """Whether a topic matches a wildcard (full match; blacklist inverts)."""
        if self.pattern is None:
            return any(t == topic for t, _ in self.counts)
        matched = re.fullmatch(self.pattern, topic) is not None
        return matched if self.whitelist else not matched

    def topic_counts(self, all_topics: Iterable[str] = ()) -> dict[str, int]:
        """``{topic: streams}``; a wildcard is expanded against ``all_topics`` (the children
        of ``/brokers/topics``), a static count ignores it."""
        if self.pattern is None:
            return dict(self.counts)
        return {t: self.num_streams for t in all_topics if self.allows(t)}

    def thread_ids_per_topic(self, consumer_id: str,
                             all_topics: Iterable[str] = ()) -> dict[str, list[str]]:
        return thread_ids(consumer_id, self.topic_counts(all_topics))

    def db_string(self) -> str:
        """The exact Scala ``dbString``: ``{ "t1": 2,"t2": 1 }`` or ``*2*regex``."""
        if self.pattern is not None:
            marker = _WHITELIST_MARKER if self.whitelist else _BLACKLIST_MARKER
            return f"{marker}{self.num_streams}{marker}{self.pattern}"
        for topic, _ in self.counts:
            # Scala does not escape the topic; a quote or backslash would make JSON that
            # every Scala member fails to parse, breaking the whole group's rebalance.
            if '"' in topic or "\\" in topic or any(ord(c) < 0x20 for c in topic):
                raise LocalProtocolError(f"topic {topic!r} cannot be written in a TopicCount")
        return "{ " + ",".join(f'"{t}": {n}' for t, n in self.counts) + " }"

    def encode(self) -> bytes:
        return self.db_string().encode("utf-8")


def _reject_constant(name: str) -> object:
    raise ValueError(name)


def parse_topic_count(path: str, data: bytes | None) -> TopicCount:
    """Parse an ids-znode value written by any 0.7 consumer.

    Static: any JSON object whose values are integers (Scala's parser turns numbers into
    Int); ``2.0``, ``true``, negative counts or non-objects raise.  Wildcard: ``*N*regex`` /
    ``!N!regex``.  A count of 0 is accepted (it yields no threads) although Scala would
    trip an assertion on it.
    """
    text = text_value(path, data, "topic count")
    if text.startswith((_WHITELIST_MARKER, _BLACKLIST_MARKER)):
        m = _WILDCARD.fullmatch(text)
        if m is None:
            raise ZnodeDataError("malformed wildcard topic count", path=path, data=data)
        n = decimal_value(path, data, m.group(2), "wildcard stream count", INT_MAX)
        pattern = normalize_topic_filter(m.group(3))
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ZnodeDataError(f"wildcard regex does not compile in Python: {exc}",
                                 path=path, data=data) from exc
        return TopicCount(pattern=pattern, whitelist=m.group(1) == _WHITELIST_MARKER,
                          num_streams=n)
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ZnodeDataError("topic count is not JSON", path=path, data=data) from exc
    if not isinstance(obj, dict):
        raise ZnodeDataError("topic count is not a JSON object", path=path, data=data)
    counts: list[tuple[str, int]] = []
    for topic, n in obj.items():
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= INT_MAX:
            raise ZnodeDataError(f"stream count for {topic!r} is not a non-negative int",
                                 path=path, data=data)
        counts.append((topic, n))
    return TopicCount(counts=tuple(counts))

