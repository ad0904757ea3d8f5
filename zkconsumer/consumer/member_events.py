"""The group member's contract: the events it consumes and the commands it emits, as values.

`zkconsumer.consumer.member_machine.MemberMachine` is a pure state machine: ``handle(event,
now) -> list[Command]``.  It never does I/O, never reads a clock (``now`` is given), starts no
thread and imports no kazoo.  Whoever runs it -- the production driver
(`zkconsumer.consumer.member_driver`) or a simulator -- *executes* the commands it returns,
in list order, and feeds what happened back as events.  This module is the manual for
such an executor.

Rules for every executor
========================

* **Order.**  Execute commands in the order returned.  ZooKeeper requests of one member
  must reach ZooKeeper in that order (one session is FIFO); their replies may be fed back
  later and interleaved with other events, but replies to one member's requests must be
  fed back in the order ZooKeeper answered them (FIFO per session, as ZooKeeper does).
  Requests returned together are independent of each other: the machine sends a request
  that depends on another one only after that one's reply, so an executor may pipeline
  them (the production driver sends a whole batch at once).
* **Request ids.**  Every command with a ``req`` field expects exactly one reply event
  carrying that ``req``: a `ZkReply` for ZooKeeper requests, a `Done` for `NotifyRevoked`.
  A reply for a ``req`` the machine no longer waits for (it abandoned the work at a close
  or a session loss) is ignored, so feeding it late is always safe.
* **One thread.**  ``handle`` is not thread-safe; call it from one thread (the driver's)
  or from the simulator loop.  Other threads post events to that thread.
* **Time.**  ``now`` is a monotonic time in seconds, never decreasing between calls.
  Timers are ``SetTimer(name, at)`` -> feed ``TimerFired(name)`` once ``now >= at``.  A
  later ``SetTimer`` with the same name replaces the earlier one; ``CancelTimer(name)``
  drops it.  A `TimerFired` for a replaced or cancelled timer is harmless (the machine
  checks its own deadlines), so an executor may fire lazily.
* **Errors are values.**  A failed ZooKeeper request is a `ZkReply` with ``error`` set to
  a `ZkError`; no exception crosses the boundary.  The machine raises only
  `zkconsumer.errors.LocalProtocolError` when *it* is misused (an illegal transition, an
  event before `Start`).

The commands, and what an executor must do for each, are in
`zkconsumer.consumer.member_commands`.

Events
======

``Start(session_id)``
    Begin (register, watch, rebalance).  ``session_id``: the connected session.
``ZkReply(req, error, data, stat, children, message)``
    Outcome of a ZooKeeper request (fields as described per request above).
``WatchFired(path, kind)``
    A one-shot watch armed by ``GetChildren(watch=True)`` / ``Exists(watch=True)`` fired
    (any change).  Watches lost with the connection do **not** fire: the machine re-arms
    them after `Connection(CONNECTED)`.
``Connection(state, session_id)``
    ``SUSPENDED``: the connection dropped, the session may live (watches are lost).
    ``LOST``: the session expired.  ``CONNECTED`` with ``session_id``: connected again --
    the same id means the session survived; a different id is a new session (the old one
    expired, possibly without a ``LOST`` being reported).
``TimerFired(name)``
``Acked(topic, partition, next_offset)``
    The application acknowledged everything of the partition before ``next_offset``.  Only
    for partitions between `AddPartitions` and `DropPartitions`; the latest value wins (it
    moves back only when the application seeks or a fetcher resets).
``OffsetReset(topic, partition, offset)``
    A fetcher found the position out of range and restarted at ``offset``
    (``autooffset.reset``): the machine persists it at once, as the reference does.
``FetcherParked(topic, partition, error)``
    A fetcher stopped fetching a partition for good (corrupt data, message too large...);
    the machine claims it afresh after ``parked_retry_s``.
``Done(req)``
    Answer to `NotifyRevoked`.
``RebalanceRequested()``
    Rebalance now (normally ZooKeeper watches do it).
``CommitRequested(token, deadline)``
    Write the acknowledged offsets that changed; answer `CommitDone`.  ``deadline``
    (absolute, same clock as ``now``) or ``None``.
``AssignmentCheckRequested(token)``
    Answer `AssignmentChecked`.
``CloseRequested(deadline)``
    Leave the group: handled at once in every state (no backoff or retry runs after it).
    Revoke everything (``on_revoked``), commit (if ``commit_on_close``) until ``deadline``,
    then `CloseSession`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = [
    "Acked",
    "AssignmentCheckRequested",
    "CloseRequested",
    "CommitRequested",
    "ConnState",
    "Connection",
    "Done",
    "Event",
    "FetcherParked",
    "Key",
    "OffsetReset",
    "RebalanceRequested",
    "Start",
    "Stat",
    "TimerFired",
    "TimerName",
    "WatchFired",
    "WatchKind",
    "ZkError",
    "ZkReply",
    "__all__",
]

#: ``(topic, "B-P")``: how the member names a partition everywhere.
Key = tuple[str, str]


class ZkError(Enum):
    """Why a ZooKeeper request failed (kazoo's exceptions, as values; see module docstring)."""

    NO_NODE = "NO_NODE"
    NODE_EXISTS = "NODE_EXISTS"
    BAD_VERSION = "BAD_VERSION"
    NOT_EMPTY = "NOT_EMPTY"
    CONNECTION_LOSS = "CONNECTION_LOSS"
    SESSION_EXPIRED = "SESSION_EXPIRED"
    OTHER = "OTHER"


class WatchKind(Enum):
    CHILDREN = "CHILDREN"
    EXISTS = "EXISTS"


class ConnState(Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


class TimerName(Enum):
    """The machine's timers (at most one of each is pending)."""

    BACKOFF = "BACKOFF"            # end of a rebalance backoff (rebalance.backoff.ms)
    RETRY = "RETRY"                # a fresh rebalance after REBALANCE_FAILED
    REGISTER = "REGISTER"          # retry registering while another session holds our id
    AUTOCOMMIT = "AUTOCOMMIT"      # autocommit.interval.ms
    PARKED = "PARKED"              # re-claim parked partitions (parked_retry_s)
    COMMIT_DEADLINE = "COMMIT_DEADLINE"  # a CommitRequested deadline
    CLOSE_DEADLINE = "CLOSE_DEADLINE"    # a CloseRequested deadline


@dataclass(frozen=True, slots=True)
class Stat:
    """The part of a ZooKeeper stat the member needs."""

    version: int
    ephemeral_owner: int = 0  # session id owning an ephemeral znode, 0 if persistent


# -- events ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Start:
    session_id: int


@dataclass(frozen=True, slots=True)
class ZkReply:
    req: int
    error: ZkError | None = None
    data: bytes | None = None
    stat: Stat | None = None
    children: tuple[str, ...] | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class WatchFired:
    path: str
    kind: WatchKind


@dataclass(frozen=True, slots=True)
class Connection:
    state: ConnState
    session_id: int | None = None


@dataclass(frozen=True, slots=True)
class TimerFired:
    name: TimerName


@dataclass(frozen=True, slots=True)
class Acked:
    topic: str
    partition: str
    next_offset: int


@dataclass(frozen=True, slots=True)
class OffsetReset:
    topic: str
    partition: str
    offset: int


@dataclass(frozen=True, slots=True)
class FetcherParked:
    topic: str
    partition: str
    error: str


@dataclass(frozen=True, slots=True)
class Done:
    req: int


@dataclass(frozen=True, slots=True)
class RebalanceRequested:
    pass


@dataclass(frozen=True, slots=True)
class CommitRequested:
    token: int
    deadline: float | None = None


@dataclass(frozen=True, slots=True)
class AssignmentCheckRequested:
    token: int


@dataclass(frozen=True, slots=True)
class CloseRequested:
    deadline: float | None = None


Event = (Start | ZkReply | WatchFired | Connection | TimerFired | Acked | OffsetReset
         | FetcherParked | Done | RebalanceRequested | CommitRequested
         | AssignmentCheckRequested | CloseRequested)
