"""`Subscription`: what a member consumes, and how it is written to ``/consumers/G/ids``.

A subscription is either static -- ``{topic: number of streams}``, registered as Scala's JSON
``{ "t1": 2,"t2": 1 }`` -- or a wildcard (whitelist / blacklist regex with ``num_streams``
streams per matching topic), registered as ``*N*regex`` / ``!N!regex`` like Scala's
``createMessageStreamsByFilter``.  The number of streams matters for interoperability even
though we hand messages out through one iterator: it is the number of *thread ids* this
member contributes to each topic's sorted thread list, which every member of the group uses
to compute the assignment.

Invariants: exactly one of ``topics`` / ``whitelist`` / ``blacklist`` is given; stream counts
are >= 1; the regex is normalised exactly as Scala's TopicFilter does (trim, ``,`` -> ``|``,
no spaces, no surrounding quotes) and must compile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zkconsumer.errors import ConfigurationError
from zkconsumer.zk.paths import TopicCount

__all__ = ["Subscription"]


@dataclass(frozen=True, eq=False)
class Subscription:
    """Static topics with stream counts, or one whitelist/blacklist filter."""

    topics: Mapping[str, int] = field(default_factory=dict)
    whitelist: str | None = None
    blacklist: str | None = None
    num_streams: int = 1

    def __post_init__(self) -> None:
        given = sum(1 for x in (bool(self.topics), self.whitelist is not None,
                                self.blacklist is not None) if x)
        if given != 1:
            raise ConfigurationError(
                "subscription: give exactly one of topics={...}, whitelist= or blacklist=")
        # Freeze a private copy: the caller's dict may change later.
        object.__setattr__(self, "topics", dict(self.topics))
        # Validates counts and the regex, raising ConfigurationError.
        object.__setattr__(self, "_topic_count", self._make_topic_count())

    @classmethod
    def of(cls, *topics: str, streams: int = 1) -> Subscription:
        """Convenience: ``Subscription.of("a", "b")`` = ``{a: 1, b: 1}``."""
        return cls(topics={t: streams for t in topics})

    def _make_topic_count(self) -> TopicCount:
        if self.topics:
            return TopicCount.static(self.topics)
        regex = self.whitelist if self.whitelist is not None else (self.blacklist or "")
        if not regex.strip():
            raise ConfigurationError("subscription: empty topic filter regex")
        return TopicCount.wildcard(self.whitelist is not None, self.num_streams, regex)

    @property
    def topic_count(self) -> TopicCount:
        """The `TopicCount` registered in ZooKeeper for this member."""
        tc: TopicCount = self.__dict__["_topic_count"]
        return tc

    @property
    def is_wildcard(self) -> bool:
        return not self.topics

    def registration(self) -> bytes:
        """The ids-znode value, byte for byte as Scala writes it."""
        return self.topic_count.encode()

    def topic_streams(self, all_topics: Iterable[str] = ()) -> dict[str, int]:
        """``{topic: streams}`` now: wildcards are expanded against ``all_topics``."""
        return self.topic_count.topic_counts(all_topics)

    def thread_ids(self, consumer_id: str, all_topics: Iterable[str] = ()) -> dict[str, list[str]]:
        """``{topic: ["<cid>-0", ...]}`` -- my threads per topic."""
        return self.topic_count.thread_ids_per_topic(consumer_id, all_topics)

    def __repr__(self) -> str:
        return f"Subscription({self.topic_count.db_string()})"
