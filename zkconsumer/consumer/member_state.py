"""The group member's states, its one transition table, its configuration and its counters.

`MemberState` is what the member is doing; the ZooKeeper *connection* (connected, suspended,
lost) is a separate, smaller fact kept next to it (as librdkafka keeps its join state and its
assignment state apart): a rebalance that is running when the connection drops goes on (its
requests are retried by the session and answered later), so "suspended" cannot be a state
that excludes "rebalancing".

States and why each exists::

    INIT          constructed; nothing sent yet.
    REGISTERING   creating our ephemeral /consumers/G/ids/<id>; when another live session
                  holds it (our previous incarnation, same configured consumer id), retry
                  every REGISTER_RETRY_S until 1.5 x zk.sessiontimeout.ms + 1 s have passed.
    REBALANCING   one rebalance attempt is running (read the view, release, claim, fetch).
    BACKOFF       an attempt failed (owner conflict or ZooKeeper error); the next one starts
                  after rebalance.backoff.ms -- earlier once every conflicting owner znode is
                  deleted, or when the group changes (a watch fires).
    FAILED        rebalance.retries.max attempts failed (RebalanceFailedError, reported as
                  REBALANCE_FAILED); a fresh rebalance starts after the backoff.
    STABLE        we own what the reference assignment gives us.
    SESSION_LOST  the session expired: our ephemerals are gone; waiting for a new session.
    RECOVERING    on the new session: release everything (committing acknowledged offsets
                  that are ahead of the stored ones), delete owner znodes a request retried
                  across the expiry created on the new session, then register again.
    CLOSING       leaving: revoke all, final commit until the deadline.
    CLOSED        the session is closed; nothing more happens.

`TRANSITIONS` is the whole protocol; `check_transition` is the only judge and
`zkconsumer.consumer.member_machine.MemberMachine._set_state` the only writer (it logs every
change, old -> new, with the reason, so a production log is a replayable trace).  Close is
accepted from every state but CLOSED: no backoff, retry or rebalance runs once it arrives.
docs/architecture.md draws this table; a unit test checks the drawing equals it.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.member_commands import (
    Command,
)
from zkconsumer.consumer.member_events import (
    Key,
)
from zkconsumer.errors import ConfigurationError, LocalProtocolError, ZkConsumerError
from zkconsumer.zk.topic_count import TopicCount

__all__ = [
    "PUBLIC_STATE",
    "TRANSITIONS",
    "MemberConfig",
    "MemberState",
    "Owned",
    "Proc",
    "RebalanceRun",
    "check_transition",
]


class MemberState(Enum):
    INIT = "INIT"
    REGISTERING = "REGISTERING"
    REBALANCING = "REBALANCING"
    BACKOFF = "BACKOFF"
    FAILED = "FAILED"
    STABLE = "STABLE"
    SESSION_LOST = "SESSION_LOST"
    RECOVERING = "RECOVERING"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


S = MemberState

#: Every legal move.  A move not listed raises `LocalProtocolError` (a bug in the machine).
TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    S.INIT: frozenset({S.REGISTERING, S.CLOSING}),
    # registered -> rebalance; a conflict past the deadline after a session recovery ->
    # FAILED (retried); the first registration failing is reported by StartDone.
    S.REGISTERING: frozenset({S.REBALANCING, S.FAILED, S.SESSION_LOST, S.CLOSING}),
    # (our ids znode deleted behind our back is registered again inside the attempt)
    S.REBALANCING: frozenset({S.STABLE, S.BACKOFF, S.FAILED, S.SESSION_LOST, S.CLOSING}),
    S.BACKOFF: frozenset({S.REBALANCING, S.SESSION_LOST, S.CLOSING}),
    S.FAILED: frozenset({S.REBALANCING, S.REGISTERING, S.RECOVERING, S.SESSION_LOST,
                         S.CLOSING}),
    S.STABLE: frozenset({S.REBALANCING, S.SESSION_LOST, S.CLOSING}),
    S.SESSION_LOST: frozenset({S.RECOVERING, S.CLOSING}),
    # recovery failing (ZooKeeper trouble) is retried from FAILED after the backoff
    S.RECOVERING: frozenset({S.REGISTERING, S.FAILED, S.SESSION_LOST, S.CLOSING}),
    S.CLOSING: frozenset({S.CLOSED}),
    S.CLOSED: frozenset(),
}

#: The string `ConsumerListener.on_state` reports on entering a state (None: nothing new to
#: report -- e.g. BACKOFF is part of a rebalance that is still REBALANCING for listeners).
#: SUSPENDED and RESUMED are reported on connection changes, not states.
PUBLIC_STATE: dict[MemberState, str | None] = {
    S.INIT: None,
    S.REGISTERING: None,
    S.REBALANCING: "REBALANCING",
    S.BACKOFF: None,
    S.FAILED: "REBALANCE_FAILED",
    S.STABLE: "STABLE",
    S.SESSION_LOST: "SESSION_LOST",
    S.RECOVERING: None,
    S.CLOSING: None,
    S.CLOSED: "CLOSED",
}


def check_transition(old: MemberState, new: MemberState, reason: str) -> None:
    """`LocalProtocolError` unless ``old -> new`` is in `TRANSITIONS`."""
    if new not in TRANSITIONS[old]:
        raise LocalProtocolError(f"illegal member transition {old.name} -> {new.name} "
                                 f"({reason})")


#: How long a parked partition waits before it is claimed afresh (re-reading its committed
#: offset, fetching again): an operator's `offsets reset` takes effect without a restart.
PARKED_RETRY_S = 30.0
#: How often registration is retried while another session holds our ids znode.
REGISTER_RETRY_S = 0.25


@dataclass(frozen=True)
class MemberConfig:
    """Everything the machine needs to know, validated up front.

    Build it from a `ConsumerConfig` with `from_consumer`, or directly (a simulator)::

        MemberConfig(group="g", consumer_id="g_host-1", topic_count=TopicCount.static({"t": 1}))
    """

    group: str
    consumer_id: str
    topic_count: TopicCount
    rebalance_retries_max: int = 4
    rebalance_backoff_ms: int = 2000
    autocommit_enable: bool = True
    autocommit_interval_ms: int = 10000
    zk_session_timeout_ms: int = 6000
    #: commit acknowledged offsets at close (autocommit on, or manual acks)
    commit_on_close: bool = True
    parked_retry_s: float = PARKED_RETRY_S
    #: in-flight attempts cap: a backoff cut short by a group change does not count as a
    #: retry, but the total is capped at this many times rebalance_retries_max
    attempts_cap_factor: int = 5

    def __post_init__(self) -> None:
        if not self.group or "/" in self.group:
            raise ConfigurationError(f"member: bad group {self.group!r}")
        if not self.consumer_id or "/" in self.consumer_id:
            raise ConfigurationError(f"member: bad consumer id {self.consumer_id!r}")
        if self.rebalance_retries_max < 1 or self.rebalance_backoff_ms < 0:
            raise ConfigurationError("member: rebalance.retries.max must be >= 1 and "
                                     "rebalance.backoff.ms >= 0")
        if self.autocommit_interval_ms <= 0 or self.zk_session_timeout_ms <= 0:
            raise ConfigurationError("member: autocommit.interval.ms and "
                                     "zk.sessiontimeout.ms must be > 0")

    @property
    def backoff_s(self) -> float:
        return self.rebalance_backoff_ms / 1000.0

    @property
    def register_wait_s(self) -> float:
        """How long registration waits for another session's ids znode to vanish."""
        return 1.5 * self.zk_session_timeout_ms / 1000.0 + 1.0

    @classmethod
    def from_consumer(cls, config: ConsumerConfig, topic_count: TopicCount, consumer_id: str,
                      *, parked_retry_s: float | None = None) -> MemberConfig:
        """From the consumer's `ConsumerConfig` (what `GroupConsumer` does)."""
        return cls(
            group=config.group_id, consumer_id=consumer_id, topic_count=topic_count,
            rebalance_retries_max=config.rebalance_retries_max,
            rebalance_backoff_ms=config.rebalance_backoff_ms,
            autocommit_enable=config.autocommit_enable,
            autocommit_interval_ms=config.autocommit_interval_ms,
            zk_session_timeout_ms=config.zk_session_timeout_ms,
            commit_on_close=config.autocommit_enable or not config.auto_ack,
            parked_retry_s=PARKED_RETRY_S if parked_retry_s is None else parked_retry_s)


#: A procedure: yields command batches, receives ``{req or TimerName: reply}``, returns T.
Proc = Generator[list[Command], dict[Any, Any], Any]


@dataclass(slots=True)
class Owned:
    """What the machine knows of one owned partition."""

    topic: str
    name: str
    thread_id: str
    claim_session: int | None  # the session the owner znode was created on
    version: int | None        # offset znode version last read or written (None: unknown)
    acked: int | None
    committed: int | None
    parked: str | None = None  # why it is not fetched (None: fetched)
    revoke_notified: bool = False

    @property
    def key(self) -> Key:
        return (self.topic, self.name)


@dataclass(slots=True)
class RebalanceRun:
    """Book-keeping of one rebalance (several attempts)."""

    started: float
    attempt: int = 0
    total: int = 0
    conflicts: list[tuple[str, bytes | None]] = field(default_factory=list)
    error: ZkConsumerError | None = None
    remaining: set[str] = field(default_factory=set)  # conflicting owners still present
