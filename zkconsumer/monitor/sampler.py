"""One poll of the whole cluster: every group's members, owners, offsets and the log ends.

The same facts ``zkconsumer group describe --verify`` reads for one group
(`zkconsumer.consumer.groupinfo`), read for every group at once and cheaply enough to repeat
every interval on a 0.7 ZooKeeper that is already carrying the cluster:

* ZooKeeper reads are pipelined in four rounds (group directories; members and per-topic
  directories; owner and offset values; topic registrations), so a poll costs a few round
  trips instead of one per znode: `zkconsumer.zk.pipeline.PipelinedReader` on a short
  session of its own (closed before the log ends are asked), or, with TLS/SASL configured,
  `zkconsumer.zk.bulk.BulkReader` through the monitor's `ZkSession`.  The number of
  reads per poll is bounded by (docs/operations.md, "Monitor")::

      2 + B + 3G + M + 2*T_g + O + C + T + T*B_t

  G groups, M members, T_g (group, topic) pairs, O owner znodes, C offset znodes, B brokers,
  T topics the groups use, B_t brokers per topic.  O counts only the owner znodes of owner
  directories that changed since the last poll (owners are created and deleted, never
  rewritten, so a directory with the same (czxid, cversion) -- from getChildren2 -- holds the
  same values): a stable group costs no owner reads.  For 500 groups of one 100-partition
  topic and one member each that is about 3,500 + 50,000 reads per poll (the first poll, and
  one after a rebalance everywhere: 3,500 + 100,000).
* Log ends: one offsets request (time -1) per distinct partition per poll -- a partition
  read by ten groups is asked once -- over one pooled connection per broker, brokers in
  parallel (one thread each).  Connections stay open between polls.

Invariants: read-only; nothing a group writes (garbage offsets, unreadable registrations,
a broker that is down) stops the poll: it becomes that partition's or member's ``error``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.consumer.assignment import assign
from zkconsumer.errors import BrokerConnectionError, BrokerError, ZnodeDataError, ZooKeeperError
from zkconsumer.monitor.bridges import read_bridges
from zkconsumer.monitor.model import Cycle, GroupObs, MemberObs, PartitionObs
from zkconsumer.zk.bulk import BulkReader
from zkconsumer.zk.paths import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONSUMERS,
    BrokerInfo,
    TopicCount,
    consumer_id_path,
    consumer_ids_path,
    offset_path,
    offsets_path,
    offsets_topic_path,
    owner_path,
    owners_path,
    owners_topic_path,
    parse_broker_id,
    parse_broker_info,
    parse_offset,
    parse_partition_count,
    parse_topic_count,
    partition_name,
)
from zkconsumer.zk.pipeline import PipelinedReader
from zkconsumer.zk.registry import log_once
from zkconsumer.zk.session import ZkSession, ZnodeInfo

__all__ = ["Sampler"]

log = logging.getLogger(__name__)


class Sampler:
    """Polls one cluster; `poll` returns a `Cycle`.  One thread at a time."""

    def __init__(self, session: ZkSession, *, groups: str | None = None,
                 socket_timeout: float = 5.0, clock: Callable[[], float] = time.time) -> None:
        self.session = session
        self.groups_re = re.compile(groups) if groups else None
        self.socket_timeout = socket_timeout
        self._clock = clock
        self._clients: dict[int, tuple[BrokerInfo, SimpleConsumer]] = {}
        #: owner directory -> ((czxid, cversion), its owner znodes' values) at the last poll
        self._owners: dict[str, tuple[tuple[int, int], dict[str, ZnodeInfo | None]]] = {}

    def close(self) -> None:
        for _, client in self._clients.values():
            client.close()
        self._clients.clear()

    # ------------------------------------------------------------------------------ poll

    def _reader(self) -> BulkReader | PipelinedReader:
        """The pipelined reader on its own plain session; kazoo's (slower, but speaking TLS
        and SASL) when security is configured or the pipelined one cannot connect."""
        if not self.session.security.enabled:
            try:
                return PipelinedReader(self.session.connect,
                                       timeout=self.session.session_timeout_ms / 1000.0).open()
            except ZooKeeperError as exc:
                log_once(log, logging.WARNING, ("monitor-pipeline", self.session.connect),
                         "monitor: pipelined ZooKeeper reads unavailable, reading through "
                         "the session instead: %s", exc)
        return BulkReader(self.session)

    def poll(self) -> Cycle:
        started = time.monotonic()
        now = self._clock()
        zk = self._reader()
        try:
            groups = [g for g in zk.children([CONSUMERS])[CONSUMERS]
                      if self.groups_re is None or self.groups_re.search(g)]
            brokers = self._read_brokers(zk)
            all_topics = zk.children([BROKER_TOPICS])[BROKER_TOPICS]
            # round 1: the three directories of every group
            dirs = zk.children([p for g in groups for p in (consumer_ids_path(g),
                                                            owners_path(g), offsets_path(g))])
            # round 2: member registrations, per-topic owner and offset directories
            member_nodes = zk.nodes([consumer_id_path(g, c) for g in groups
                                     for c in dirs[consumer_ids_path(g)]])
            owner_dirs = zk.children_versioned(
                [owners_topic_path(g, t) for g in groups for t in dirs[owners_path(g)]])
            topic_dirs = zk.children(
                [offsets_topic_path(g, t) for g in groups for t in dirs[offsets_path(g)]])
            topic_dirs.update({path: names for path, (names, _) in owner_dirs.items()})
            # round 3: owner values (only of owner directories that changed) and offsets
            stale = [path for path, (_, version) in owner_dirs.items()
                     if version is None or self._owners.get(path, (None,))[0] != version]
            values = zk.nodes([f"{path}/{p}" for path in stale for p in topic_dirs[path]]
                              + [offset_path(g, t, p) for g in groups
                                 for t in dirs[offsets_path(g)]
                                 for p in topic_dirs[offsets_topic_path(g, t)]])
            values.update(self._cached_owners(owner_dirs, stale, values))
            members = {g: self._members(g, dirs[consumer_ids_path(g)], member_nodes,
                                        all_topics) for g in groups}
            used = {t for g in groups
                    for t in (*dirs[owners_path(g)], *dirs[offsets_path(g)],
                              *(t for m in members[g] for t in m.threads))}
            # round 4: partitions of the topics in use
            partitions = self._read_partitions(zk, sorted(used & set(all_topics)))
            bridges, bridged = read_bridges(zk, self.groups_re)
        finally:
            zk.close()
        wanted = {(t, p) for g in groups for t in dirs[offsets_path(g)]
                  for p in topic_dirs[offsets_topic_path(g, t)]}
        wanted |= {(t, p) for t in used for p in partitions.get(t, [])} | bridged
        ends, errors, requests, failures = self._log_ends(wanted, brokers)
        out: dict[str, GroupObs] = {}
        for g in groups:
            out[g] = self._group(g, members[g], dirs, topic_dirs, values, partitions,
                                 set(all_topics), brokers, ends, errors)
        for b in bridges:
            rows = [replace(r, log_end=ends.get((r.topic, r.partition)),
                            error=r.error or errors.get((r.topic, r.partition)))
                    for r in b.partitions]
            out[b.group] = replace(b, partitions=rows)
        return Cycle(now, out, time.monotonic() - started, zk.reads, requests, failures)

    # ------------------------------------------------------------------------------ cluster

    def _cached_owners(self, owner_dirs: dict[str, tuple[list[str], tuple[int, int] | None]],
                       stale: list[str], values: dict[str, ZnodeInfo | None]
                       ) -> dict[str, ZnodeInfo | None]:
        """Owner znodes are created and deleted, never rewritten (0.7 and zkconsumer alike),
        so an owner directory whose (czxid, cversion) did not change since the last poll holds
        the values read then: reuse them, remember the fresh ones, forget vanished dirs."""
        fresh = set(stale)
        cached: dict[str, ZnodeInfo | None] = {}
        for path, (names, version) in owner_dirs.items():
            if path in fresh:
                if version is not None:
                    self._owners[path] = (version, {f"{path}/{n}": values.get(f"{path}/{n}")
                                                    for n in names})
            else:
                cached.update(self._owners[path][1])
        for path in [p for p in self._owners if p not in owner_dirs]:
            del self._owners[path]
        return cached

    def _read_brokers(self, zk: BulkReader | PipelinedReader) -> dict[int, BrokerInfo]:
        ids = zk.children([BROKER_IDS])[BROKER_IDS]
        nodes = zk.nodes([f"{BROKER_IDS}/{c}" for c in ids])
        brokers: dict[int, BrokerInfo] = {}
        for path, node in nodes.items():
            if node is None:
                continue
            try:
                bid = parse_broker_id(path.rsplit("/", 1)[1], path=path)
                brokers[bid] = parse_broker_info(bid, node.data)
            except ZnodeDataError as exc:
                log.warning("monitor: skipping an unreadable broker registration: %s", exc)
        return brokers

    def _read_partitions(self, zk: BulkReader | PipelinedReader, topics: list[str]) -> dict[str, list[str]]:
        per_topic = zk.children([f"{BROKER_TOPICS}/{t}" for t in topics])
        nodes = zk.nodes([f"{BROKER_TOPICS}/{t}/{b}" for t in topics
                          for b in per_topic[f"{BROKER_TOPICS}/{t}"]])
        out: dict[str, list[str]] = {t: [] for t in topics}
        for path, node in nodes.items():
            if node is None:
                continue
            _, _, topic, broker = path.rsplit("/", 3)
            try:
                bid = parse_broker_id(broker, path=path)
                count = parse_partition_count(path, node.data)
            except ZnodeDataError as exc:
                log.warning("monitor: skipping an unreadable topic registration: %s", exc)
                continue
            out[topic].extend(partition_name(bid, p) for p in range(count))
        return {t: sorted(names) for t, names in out.items()}

    def _log_ends(self, wanted: Iterable[tuple[str, str]], brokers: dict[int, BrokerInfo]
                  ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], str], int, int]:
        """Latest offsets, one request per partition, one thread per broker."""
        per_broker: dict[int, list[tuple[str, str, int]]] = {}
        errors: dict[tuple[str, str], str] = {}
        for topic, name in sorted(wanted):
            b, _, p = name.partition("-")
            try:
                bid, part = int(b), int(p)
            except ValueError:
                errors[(topic, name)] = f"partition name {name!r} is not <broker>-<partition>"
                continue
            if bid not in brokers:
                errors[(topic, name)] = f"broker {bid} is not registered in /brokers/ids"
                continue
            per_broker.setdefault(bid, []).append((topic, name, part))
        for bid, info in brokers.items():  # a broker re-registered elsewhere: new connection
            known = self._clients.get(bid)
            if known is not None and known[0].address != info.address:
                known[1].close()
                del self._clients[bid]
            if bid not in self._clients and bid in per_broker:
                self._clients[bid] = (info, SimpleConsumer(
                    info.host, info.port, socket_timeout=self.socket_timeout,
                    connect_timeout=self.socket_timeout))
        ends: dict[tuple[str, str], int] = {}
        counts = [0, 0]

        def ask(bid: int) -> None:
            client = self._clients[bid][1]
            for topic, name, part in per_broker[bid]:
                counts[0] += 1
                try:
                    ends[(topic, name)] = client.latest_offset(topic, part)
                except (BrokerConnectionError, BrokerError) as exc:
                    counts[1] += 1
                    errors[(topic, name)] = f"log end unknown: {exc}"

        if per_broker:
            with ThreadPoolExecutor(max_workers=min(len(per_broker), 16),
                                    thread_name_prefix="monitor-logend") as pool:
                list(pool.map(ask, sorted(per_broker)))
        return ends, errors, counts[0], counts[1]

    # ------------------------------------------------------------------------------ groups

    def _members(self, group: str, ids: list[str], nodes: dict[str, ZnodeInfo | None],
                 all_topics: list[str]) -> list[MemberObs]:
        out: list[MemberObs] = []
        for cid in ids:
            path = consumer_id_path(group, cid)
            node = nodes.get(path)
            if node is None:
                continue  # left while we read
            try:
                tc: TopicCount = parse_topic_count(path, node.data)
                out.append(MemberObs(cid, tc.db_string(),
                                     tc.thread_ids_per_topic(cid, all_topics)))
            except ZnodeDataError as exc:
                out.append(MemberObs(cid, "", {}, error=str(exc)))
        return out

    def _group(self, g: str, members: list[MemberObs], dirs: dict[str, list[str]],
               topic_dirs: dict[str, list[str]], values: dict[str, ZnodeInfo | None],
               partitions: dict[str, list[str]], registered: set[str],
               brokers: dict[int, BrokerInfo], ends: dict[tuple[str, str], int],
               errors: dict[tuple[str, str], str]) -> GroupObs:
        threads: dict[str, set[str]] = {}
        problems = [f"member {m.consumer_id} has an unreadable registration: {m.error}"
                    for m in members if m.error]
        for m in members:
            for topic, ids in m.threads.items():
                threads.setdefault(topic, set()).update(ids)
        topics = set(threads) | set(dirs[owners_path(g)]) | set(dirs[offsets_path(g)])
        rows: list[PartitionObs] = []
        for topic in sorted(topics):
            names = partitions.get(topic, [])
            live = threads.get(topic, set())
            expected = assign(names, live, live) if live else {}
            owned = set(topic_dirs.get(owners_topic_path(g, topic), []))
            committed = set(topic_dirs.get(offsets_topic_path(g, topic), []))
            for name in sorted(set(names) | owned | committed):
                onode = values.get(owner_path(g, topic, name)) if name in owned else None
                owner = None if onode is None else (onode.data or b"").decode("utf-8",
                                                                               "replace")
                offset, mtime, error = None, None, errors.get((topic, name))
                cnode = values.get(offset_path(g, topic, name)) if name in committed else None
                if cnode is not None:
                    try:
                        offset = parse_offset(offset_path(g, topic, name), cnode.data)
                        mtime = cnode.mtime_ms
                    except ZnodeDataError as exc:
                        error = f"committed offset unreadable: {exc}"
                problem = (_ownership_problem(topic, name, owner, live, expected.get(name),
                                              brokers)
                           if topic in threads and name in names else None)
                rows.append(PartitionObs(topic, name, owner, owner is not None and owner in live,
                                         expected.get(name), offset, mtime,
                                         ends.get((topic, name)), error, problem))
        unregistered = sorted(t for t in threads if t not in registered or not partitions.get(t))
        return GroupObs(g, members, rows, problems, unregistered)


def _ownership_problem(topic: str, name: str, owner: str | None, live: set[str],
                       expected: str | None, brokers: dict[int, BrokerInfo]) -> str | None:
    """`group describe --verify` for one subscribed partition (consumer/groupinfo.py)."""
    where = f"{topic}/{name}"
    if int(name.split("-", 1)[0]) not in brokers:
        return (f"{where} is on a broker that is not registered in /brokers/ids: "
                "no member can fetch it")
    if owner is None:
        return f"{where} has no owner"
    if owner not in live:
        return f"{where} is owned by {owner}, which is not a live consumer thread"
    if expected not in (None, owner):
        return f"{where} is owned by {owner}, but the assignment names {expected}"
    return None
