"""The member's ZooKeeper plumbing and reads, as procedures of the pure machine.

Each function here is a generator (`zkconsumer.consumer.member_state.Proc`): it yields a
batch of commands and receives ``{req: reply}`` once every request of the batch was answered
(see `zkconsumer.consumer.member_machine`).  `gather` runs several of them side by side in
lock-step, so N offsets are committed, or N owner znodes read, in one round trip.  Nothing
here does I/O; a step that cannot go on raises a `ZkConsumerError` *value* built from the
reply (`failed`), which ends the procedure.  Owned partitions (claim, release, commits)
are in `zkconsumer.consumer.member_ownership`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from zkconsumer.consumer.member_commands import (
    Command,
    Create,
    GetChildren,
    GetData,
    SetTimer,
    StartFetchers,
)
from zkconsumer.consumer.member_events import (
    Key,
    TimerName,
    ZkError,
    ZkReply,
)
from zkconsumer.consumer.member_host import Member
from zkconsumer.consumer.member_state import REGISTER_RETRY_S, Proc
from zkconsumer.consumer.view import (
    GroupView,
    need_all_topics,
    parse_members,
    view_threads,
)
from zkconsumer.errors import (
    ConsumerError,
    SessionExpiredError,
    ZkConsumerError,
    ZooKeeperError,
)
from zkconsumer.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    BrokerInfo,
    consumer_id_path,
    consumer_ids_path,
    parse_partition_name,
    topic_path,
)
from zkconsumer.zk.registry import parse_brokers, parse_topic_partitions, partition_names

__all__ = [
    "Conflict",
    "awaited",
    "call",
    "calls",
    "create_expect_conflict",
    "failed",
    "fetchers_match",
    "gather",
    "group_by_topic",
    "read_view",
    "register",
    "start_fetchers",
]

log = logging.getLogger(__name__)

#: (owner path, value found there or None if it vanished meanwhile)
Conflict = tuple[str, bytes | None]


def group_by_topic(keys: Iterable[Key]) -> dict[str, list[str]]:
    """``[(topic, "B-P"), ...]`` -> ``{topic: sorted ["B-P", ...]}``."""
    out: dict[str, list[str]] = defaultdict(list)
    for topic, name in keys:
        out[topic].append(name)
    return {t: sorted(v) for t, v in sorted(out.items())}


# -- plumbing ----------------------------------------------------------------------------------

def awaited(batch: Sequence[Command]) -> set[Any]:
    """What a yielded batch waits for: its requests' ids and its timers' names."""
    keys: set[Any] = set()
    for command in batch:
        if isinstance(command, SetTimer):
            keys.add(command.name)
        else:
            req = getattr(command, "req", None)
            if req is not None:
                keys.add(req)
    return keys


def call(command: Command) -> Proc:
    """One request; returns its reply."""
    replies = yield [command]
    return replies[command.req]  # type: ignore[union-attr]


def calls(commands: Sequence[Command]) -> Proc:
    """Requests sent together; returns their replies in the same order."""
    if not commands:
        return []
    replies = yield list(commands)
    return [replies[c.req] for c in commands]  # type: ignore[union-attr]


def gather(procs: Sequence[Proc]) -> Proc:
    """Run procedures side by side; returns each one's result or the error it raised."""
    results: list[Any] = [None] * len(procs)
    values: dict[int, Any] = {i: None for i in range(len(procs))}
    while values:
        batch: list[Command] = []
        waiting: dict[int, set[Any]] = {}
        for i, value in values.items():
            while True:
                try:
                    step = procs[i].send(value)
                except StopIteration as stop:
                    results[i] = stop.value
                    break
                except ZkConsumerError as exc:
                    results[i] = exc
                    break
                batch.extend(step)
                keys = awaited(step)
                if keys:
                    waiting[i] = keys
                    break
                value = {}
        if not waiting:
            break
        replies = yield batch
        values = {i: {k: replies[k] for k in keys} for i, keys in waiting.items()}
    return results


def failed(reply: ZkReply, what: str, path: str) -> ZkConsumerError:
    """The error a failed reply stands for (kazoo's translation, as `ZkSession` does it)."""
    error = reply.error
    detail = f"{what} {path}: {error.name if error else 'error'}"
    if reply.message:
        detail += f" ({reply.message})"
    if error is ZkError.SESSION_EXPIRED:
        return SessionExpiredError(detail)
    return ZooKeeperError(detail)


def expect_ok(reply: ZkReply, what: str, path: str) -> ZkReply:
    if reply.error is not None:
        raise failed(reply, what, path)
    return reply


def children_of(reply: ZkReply, path: str) -> list[str]:
    """Children sorted; [] for a missing znode (getChildrenParentMayNotExist)."""
    if reply.error is ZkError.NO_NODE:
        return []
    return sorted(expect_ok(reply, "get_children", path).children or ())


def data_of(reply: ZkReply, path: str) -> bytes | None:
    """The data (b"" for null data); None if the znode vanished."""
    if reply.error is ZkError.NO_NODE:
        return None
    data = expect_ok(reply, "get", path).data
    return b"" if data is None else data


# -- registration and the view -----------------------------------------------------------------

def create_expect_conflict(m: Member, path: str, value: bytes) -> Proc:
    """Scala's createEphemeralPathExpectConflict: ``(True, None)`` if the znode is ours,
    ``(False, holder)`` if someone else holds it (``holder`` None: it vanished meanwhile)."""
    reply = yield from call(Create(m.req(), path, value, ephemeral=True))
    if reply.error is None:
        return True, None
    if reply.error is not ZkError.NODE_EXISTS:
        raise failed(reply, "create", path)
    got = yield from call(GetData(m.req(), path))
    if got.error is ZkError.NO_NODE:
        return False, None
    expect_ok(got, "get", path)
    owner = got.stat.ephemeral_owner if got.stat else 0
    if got.data == value and owner == m.session_id:
        log.info("%s exists with value %r during connection loss; this is ok", path, value)
        return True, None
    log.info("conflict in %s: wanted %r, stored %r (owner session 0x%x)", path, value,
             got.data, owner)
    return False, got.data if got.data is not None else b""


def register(m: Member) -> Proc:
    """Create our ids znode.  If another session holds it (a previous incarnation with the
    same configured ``consumerid`` that died moments ago), wait for that session to expire
    -- up to 1.5 x ``zk.sessiontimeout.ms`` + 1 s -- instead of adopting a znode that would
    vanish under us later."""
    cfg = m.config
    path = consumer_id_path(cfg.group, cfg.consumer_id)
    value = cfg.topic_count.encode()
    deadline = m.now + cfg.register_wait_s
    while True:
        ours, holder = yield from create_expect_conflict(m, path, value)
        if ours:
            log.info("registered %s = %s", path, value.decode())
            return None
        if m.now > deadline:
            raise ConsumerError(f"consumer id {cfg.consumer_id} is already registered in "
                                f"group {cfg.group} by another live session ({path} = "
                                f"{holder!r})")
        log.warning("%s is held by another session; waiting for it to expire", path)
        yield [SetTimer(TimerName.REGISTER, m.now + REGISTER_RETRY_S)]


def read_view(m: Member) -> Proc:
    """What one rebalance attempt decides from (`zkconsumer.consumer.view`), in two or
    three round trips: members, brokers and (static subscriptions) topic partitions are
    listed together, then read together."""
    cfg = m.config
    mine = cfg.topic_count
    ids_path = consumer_ids_path(cfg.group)
    lists = [GetChildren(m.req(), ids_path), GetChildren(m.req(), BROKER_IDS),
             GetChildren(m.req(), BROKER_TOPICS)]
    known = [] if mine.is_wildcard else [t for t, _ in mine.counts]
    topic_lists = [GetChildren(m.req(), topic_path(t)) for t in known]
    replies = yield from calls(lists + topic_lists)
    cids = children_of(replies[0], ids_path)
    bids = children_of(replies[1], BROKER_IDS)
    all_topics_listed = children_of(replies[2], BROKER_TOPICS)
    topic_children = {t: children_of(r, topic_path(t))
                      for t, r in zip(known, replies[3:], strict=True)}
    member_reads = [GetData(m.req(), consumer_id_path(cfg.group, c)) for c in cids]
    broker_reads = [GetData(m.req(), f"{BROKER_IDS}/{b}") for b in bids]
    part_reads = _partition_reads(m, topic_children)
    replies = yield from calls(member_reads + broker_reads + [r for _, _, r in part_reads])
    n_members, n_brokers = len(member_reads), len(broker_reads)
    members, unreadable = parse_members(cfg.group, _entries(cids, member_reads,
                                                            replies[:n_members]))
    brokers = parse_brokers(_entries(bids, broker_reads,
                                     replies[n_members:n_members + n_brokers]))
    counts = _partition_counts(part_reads, replies[n_members + n_brokers:])
    all_topics = all_topics_listed if need_all_topics(mine, members) else []
    my_threads, threads = view_threads(cfg.group, cfg.consumer_id, mine, members, all_topics)
    missing = [t for t in my_threads if t not in topic_children]
    if missing:  # wildcard topics: list their partitions now
        lists2 = [GetChildren(m.req(), topic_path(t)) for t in missing]
        replies = yield from calls(lists2)
        more = {t: children_of(r, topic_path(t)) for t, r in zip(missing, replies, strict=True)}
        reads2 = _partition_reads(m, more)
        replies = yield from calls([r for _, _, r in reads2])
        counts.update(_partition_counts(reads2, replies))
        for t in more:
            counts.setdefault(t, {})
    partitions = {t: partition_names(counts.get(t, {})) for t in my_threads}
    return GroupView(members, all_topics, my_threads, threads, partitions, brokers, unreadable)


def _entries(names: list[str], reads: list[GetData], replies: Sequence[ZkReply],
             ) -> list[tuple[str, bytes | None]]:
    return [(n, data_of(r, q.path)) for n, q, r in zip(names, reads, replies, strict=True)]


def _partition_reads(m: Member, children: Mapping[str, list[str]],
                     ) -> list[tuple[str, str, GetData]]:
    return [(t, child, GetData(m.req(), f"{topic_path(t)}/{child}"))
            for t, names in children.items() for child in names]


def _partition_counts(reads: list[tuple[str, str, GetData]], replies: Sequence[ZkReply],
                      ) -> dict[str, dict[int, int]]:
    entries: dict[str, list[tuple[str, bytes | None]]] = {}
    for (topic, child, req), reply in zip(reads, replies, strict=True):
        entries.setdefault(topic, []).append((child, data_of(reply, req.path)))
    return {t: parse_topic_partitions(t, e) for t, e in entries.items()}


# -- fetchers ----------------------------------------------------------------------------------

def start_fetchers(m: Member, brokers: Mapping[int, BrokerInfo]) -> None:
    """(Re)start fetching the owned, unparked partitions from the brokers' current
    addresses (remembered, so an unchanged rebalance can tell whether a restart is due)."""
    used = {parse_partition_name(o.name)[0] for o in m.owned.values() if o.parked is None}
    m.fetch_brokers = {b: brokers[b] for b in used if b in brokers}
    m.emit(StartFetchers(tuple(info for _, info in sorted(brokers.items()))))


def fetchers_match(m: Member, brokers: Mapping[int, BrokerInfo]) -> bool:
    """Whether the fetchers run, for what we own, from the brokers' current addresses;
    False after any StopFetchers (a failed attempt may have stopped them and kept every
    partition: the next successful attempt must start them again)."""
    running = m.fetch_brokers
    if running is None:
        return False
    used = {parse_partition_name(o.name)[0] for o in m.owned.values() if o.parked is None}
    return all(brokers.get(b) == running.get(b) for b in used)


