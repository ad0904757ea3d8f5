"""The group member's commands: what an executor of `MemberMachine` must do for each.

Read `zkconsumer.consumer.member_events` first (the general rules: order, request ids,
one thread, time, errors as values).

ZooKeeper requests (commands with ``req``; reply: ``ZkReply(req, ...)``)
========================================================================

``GetData(req, path)``
    Reply ``data`` (``None`` for null data) and ``stat``; ``NO_NODE`` if missing.
``GetChildren(req, path, watch)``
    Reply ``children`` (any order; the machine sorts); ``NO_NODE`` if missing.  With
    ``watch=True`` the executor arms a one-shot *children* watch on ``path``; if the znode
    does not exist it arms a one-shot *existence* watch instead (so its creation fires), and
    replies ``NO_NODE``.  Either fires later as ``WatchFired(path, WatchKind.CHILDREN)``
    (at most once per arming).  The machine re-arms by issuing another watched
    ``GetChildren``.
``Exists(req, path, watch)``
    Reply ``stat`` (``None`` if missing; never an error for a missing znode).  With
    ``watch=True`` the next creation, deletion or data change of ``path`` fires
    ``WatchFired(path, WatchKind.EXISTS)`` once.
``Create(req, path, data, ephemeral)``
    Create ``path`` (ephemeral on this member's *current* session, or persistent), first
    creating missing ancestors as persistent znodes with **null** data (zkclient's
    ``createParentPath``; what Scala does).  Reply ``stat`` of the new znode (version 0).
    ``NODE_EXISTS`` if it exists, ``NO_NODE`` if an ancestor vanished meanwhile.
``SetData(req, path, data, version)``
    Compare-and-set: write only if the znode is at ``version`` (``-1``: any).  Reply the
    new ``stat``; ``BAD_VERSION`` or ``NO_NODE`` otherwise.  This is how offsets are
    committed (``/consumers/G/offsets/T/B-P``, decimal ASCII, `zkconsumer.zk.paths`).
``Delete(req, path, version)``
    Delete if at ``version`` (``-1``: any).  ``NO_NODE``, ``BAD_VERSION``, ``NOT_EMPTY``.
    **Never retried after a connection loss**: answer ``CONNECTION_LOSS`` instead.  A
    delete that reached the server, retried, could remove the znode another member created
    at the same path meanwhile (a new znode starts again at version 0, so the version does
    not protect it); the machine reads the znode again -- still ours? -- before it deletes
    once more.
``Multi(req, ops)``
    Reserved for an atomic claim; the machine does not emit it yet.  ``ops`` are `Create`,
    `SetData`, `Delete` values whose own ``req`` is ignored; reply ``error`` is the first
    failing op's error, nothing applied.

Any request may also fail with:

* ``CONNECTION_LOSS`` -- no answer; the request **may or may not have been applied**.  The
  production driver retries across connection losses (every request but `Delete`) for
  ``zk.sessiontimeout.ms + zk.connectiontimeout.ms`` before answering this, and a retried request may land on a
  *new* session (so an ephemeral create can come to life on the new session: the machine
  cleans that up after an expiry).  A simulator may reproduce both outcomes.
* ``SESSION_EXPIRED`` -- the session is gone, with its ephemerals.
* ``OTHER`` -- anything else (bad path, server error); ``message`` says what.

Other commands (no reply unless stated)
=======================================

``SetTimer(name, at)`` / ``CancelTimer(name)``
    See *Time* above.  Names are `TimerName` values.
``PauseDelivery()`` / ``ResumeDelivery()``
    Stop / restart handing messages to the application (a ZooKeeper connection loss must
    not let a member deliver partitions it may have lost).
``AddPartitions(partitions)``
    The member now owns these partitions (`OwnedPartition`: topic, ``"B-P"``, thread id,
    committed offset or ``None`` = apply ``autooffset.reset``, and ``error`` for a parked
    one: its committed offset is unreadable; hand that error to the application once and
    never fetch it).  Create their fetch state; do not fetch yet.
``RevokePartitions(keys)``
    Stop handing out messages of these ``(topic, "B-P")`` keys and drop what is queued.
    Acks of already handed-out messages still count until `DropPartitions`.
``DropPartitions(keys)``
    Forget the partitions: later acks of their messages are ignored.
``StopFetchers()``
    Stop every fetcher at once (they may finish in the background; nothing they fetch after
    this is delivered).
``StartFetchers(brokers)``
    One fetcher per broker (`zkconsumer.zk.paths.BrokerInfo`) for the owned, not revoked,
    not parked partitions, from their current positions.  Replaces running fetchers.
``NotifyState(state)`` / ``NotifyAssigned(partitions)``
    Call the application's listeners (``on_state`` with the public state string;
    ``on_assigned`` with ``{topic: ["B-P", ...]}``).  Listener errors are the executor's to
    log; they never reach the machine.
``NotifyRevoked(req, partitions)``
    Call ``on_revoked``; then feed every ack the application made meanwhile (as `Acked`),
    then ``Done(req)``.  The machine commits after `Done`, so acks made in ``on_revoked``
    (the application's last chance) are committed.
``RecordCommitted(topic, partition, offset)``
    Informational: the offset now stored for the partition (for stats / ``stats()``).
``ReportHealth(watches_armed)``
    The value `GroupConsumer.watches_armed` returns from now on.
``StartDone(error)``
    Answer to `Start`: the first rebalance succeeded (``error`` ``None``) or failed for
    good (a `zkconsumer.errors.ZkConsumerError` value to raise to the caller of ``start``).
``CommitDone(token, failures)``
    Answer to `CommitRequested`: how many partitions were not written (writes still running
    at the deadline count as failed).
``AssignmentChecked(token, drift, error)``
    Answer to `AssignmentCheckRequested`: the lines of `GroupConsumer.check_assignment`, or
    the error that prevented reading ZooKeeper.
``CloseSession()``
    End the ZooKeeper session (our ids and owner znodes vanish at once) and stop the
    fetchers for good; the machine is ``CLOSED`` after emitting it and emits nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zkconsumer.consumer.member_events import Key, TimerName
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.paths import BrokerInfo

__all__ = [
    "AddPartitions",
    "AssignmentChecked",
    "CancelTimer",
    "CloseSession",
    "Command",
    "CommitDone",
    "Create",
    "Delete",
    "DropPartitions",
    "Exists",
    "GetChildren",
    "GetData",
    "Multi",
    "NotifyAssigned",
    "NotifyRevoked",
    "NotifyState",
    "OwnedPartition",
    "PauseDelivery",
    "RecordCommitted",
    "ReportHealth",
    "ResumeDelivery",
    "RevokePartitions",
    "SetData",
    "SetTimer",
    "StartDone",
    "StartFetchers",
    "StopFetchers",
    "ZkRequest",
]


# -- ZooKeeper requests ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class GetData:
    req: int
    path: str


@dataclass(frozen=True, slots=True)
class GetChildren:
    req: int
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Exists:
    req: int
    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Create:
    req: int
    path: str
    data: bytes | None
    ephemeral: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    req: int
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    req: int
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Multi:
    req: int
    ops: tuple[Create | SetData | Delete, ...]


ZkRequest = GetData | GetChildren | Exists | Create | SetData | Delete | Multi


# -- other commands ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OwnedPartition:
    """A partition just claimed: its committed offset (``None``: none stored) or the error
    that parks it (unreadable committed offset)."""

    topic: str
    partition: str  # "B-P"
    thread_id: str
    offset: int | None
    error: ZkConsumerError | None = None

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class SetTimer:
    name: TimerName
    at: float


@dataclass(frozen=True, slots=True)
class CancelTimer:
    name: TimerName


@dataclass(frozen=True, slots=True)
class PauseDelivery:
    pass


@dataclass(frozen=True, slots=True)
class ResumeDelivery:
    pass


@dataclass(frozen=True, slots=True)
class AddPartitions:
    partitions: tuple[OwnedPartition, ...]


@dataclass(frozen=True, slots=True)
class RevokePartitions:
    keys: tuple[Key, ...]


@dataclass(frozen=True, slots=True)
class DropPartitions:
    keys: tuple[Key, ...]


@dataclass(frozen=True, slots=True)
class StopFetchers:
    pass


@dataclass(frozen=True, slots=True)
class StartFetchers:
    brokers: tuple[BrokerInfo, ...]


@dataclass(frozen=True, slots=True)
class NotifyState:
    state: str


@dataclass(frozen=True, slots=True)
class NotifyAssigned:
    partitions: dict[str, list[str]] = field(hash=False)


@dataclass(frozen=True, slots=True)
class NotifyRevoked:
    req: int
    partitions: dict[str, list[str]] = field(hash=False)


@dataclass(frozen=True, slots=True)
class RecordCommitted:
    topic: str
    partition: str
    offset: int


@dataclass(frozen=True, slots=True)
class ReportHealth:
    watches_armed: bool


@dataclass(frozen=True, slots=True)
class StartDone:
    error: ZkConsumerError | None


@dataclass(frozen=True, slots=True)
class CommitDone:
    token: int
    failures: int


@dataclass(frozen=True, slots=True)
class AssignmentChecked:
    token: int
    drift: tuple[str, ...]
    error: ZkConsumerError | None = None


@dataclass(frozen=True, slots=True)
class CloseSession:
    pass


Command = (ZkRequest | SetTimer | CancelTimer | PauseDelivery | ResumeDelivery
           | AddPartitions | RevokePartitions | DropPartitions | StopFetchers | StartFetchers
           | NotifyState | NotifyAssigned | NotifyRevoked | RecordCommitted | ReportHealth
           | StartDone | CommitDone | AssignmentChecked | CloseSession)
