"""Helpers (imported as ``groupkit``) for the consumer-group integration tests: producing, fast configs, Scala members.

`ScalaMember` plays a Scala 0.7.2 ``ZookeeperConsumerConnector`` *at the ZooKeeper level*:
it registers its ids znode with Scala's exact bytes and, on `ScalaMember.rebalance`, follows
REFERENCE §2.4 itself -- read every member's ids value, expand, sort as strings, compute its
range, release ALL its owner znodes, then claim all-or-nothing with owner value = thread id.
Its assignment code is written here independently of ``zkconsumer.consumer.assignment`` so
the tests check our member against a second implementation of the reference.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from zkconsumer.client.connection import BrokerConnection
from zkconsumer.client.produce import produce
from zkconsumer.consumer import ConsumerConfig, GroupConsumer
from zkconsumer.protocol import Compression, encode_message_set

GROUP = "g1"


def produce_to(broker: Any, topic: str, partition: int, payloads: Sequence[bytes],
               compression: Compression = Compression.NONE) -> None:
    """Confirmed produce of one message set to ``broker`` (a dev broker handle)."""
    with BrokerConnection(broker.host, broker.port) as conn:
        produce(conn, topic, partition, encode_message_set(list(payloads),
                                                           compression=compression),
                confirm=True)


def fast_config(zk_connect: str, group: str = GROUP, **overrides: Any) -> ConsumerConfig:
    """Settings that keep tests fast: short backoffs, quick autocommit, short timeouts."""
    values: dict[str, Any] = dict(
        group_id=group, zk_connect=zk_connect, rebalance_backoff_ms=100,
        rebalance_retries_max=20, fetcher_backoff_ms=20, autocommit_interval_ms=200,
        zk_session_timeout_ms=6000, zk_connection_timeout_ms=10000, socket_timeout_ms=5000,
        fetch_size=64 * 1024)
    values.update(overrides)
    return ConsumerConfig(**values)


def drain(consumer: GroupConsumer, n: int, timeout: float = 15.0) -> list[Any]:
    """Poll until ``n`` messages arrived (fails the test on timeout)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"only {len(got)} of {n} messages arrived")
        got.extend(consumer.poll_batch(n - len(got), timeout=min(remaining, 0.5)))
    return got


# --------------------------------------------------------------------------------------------
# The Scala member emulator
# --------------------------------------------------------------------------------------------


def reference_assignment(partitions: list[str], threads: list[str], mine: list[str]) -> dict:
    """REFERENCE §2.4 step 6, written out again: sorted strings, range split."""
    parts = sorted(partitions)
    cons = sorted(threads)
    per, extra = len(parts) // len(cons), len(parts) % len(cons)
    out = {}
    for t in mine:
        pos = cons.index(t)
        start = per * pos + min(pos, extra)
        n = per + (0 if pos + 1 > extra else 1)
        for i in range(start, start + n):
            out[parts[i]] = t
    return out


class ScalaMember:
    """A consumer that writes and claims exactly like Scala 0.7.2 (see module docstring)."""

    def __init__(self, client: KazooClient, group: str, name: str,
                 topics: dict[str, int] | None = None, wildcard: str | None = None) -> None:
        self.client = client
        self.group = group
        self.consumer_id = f"{group}_{name}"
        self.topics = topics or {}
        self.wildcard = wildcard  # e.g. "*1*t.*"
        self.owned: dict[tuple[str, str], str] = {}

    @property
    def registration(self) -> bytes:
        if self.wildcard is not None:
            return self.wildcard.encode()
        return ("{ " + ",".join(f'"{t}": {n}' for t, n in self.topics.items()) + " }").encode()

    def register(self) -> None:
        path = f"/consumers/{self.group}/ids/{self.consumer_id}"
        self.client.ensure_path(f"/consumers/{self.group}/ids")
        self.client.create(path, self.registration, ephemeral=True)

    def unregister(self) -> None:
        self.release()
        self.client.delete(f"/consumers/{self.group}/ids/{self.consumer_id}")

    def _threads_of(self, cid: str, value: bytes, all_topics: list[str]) -> dict[str, list[str]]:
        text = value.decode()
        m = re.fullmatch(r"([*!])(\d+)\1(.*)", text)
        if m:
            n, regex = int(m.group(2)), m.group(3)
            white = m.group(1) == "*"
            topics = {t: n for t in all_topics
                      if (re.fullmatch(regex, t) is not None) == white}
        else:
            topics = json.loads(text)
        return {t: [f"{cid}-{i}" for i in range(n)] for t, n in topics.items()}

    def compute(self) -> dict[tuple[str, str], str]:
        """What this member should own according to the current ZooKeeper view."""
        c = self.client
        all_topics = c.get_children("/brokers/topics") if c.exists("/brokers/topics") else []
        threads: dict[str, list[str]] = {}
        mine: dict[str, list[str]] = {}
        for cid in c.get_children(f"/consumers/{self.group}/ids"):
            value, _ = c.get(f"/consumers/{self.group}/ids/{cid}")
            for t, ids in self._threads_of(cid, value, all_topics).items():
                threads.setdefault(t, []).extend(ids)
                if cid == self.consumer_id:
                    mine[t] = ids
        decision = {}
        for topic, my_ids in mine.items():
            parts = []
            path = f"/brokers/topics/{topic}"
            for b in (c.get_children(path) if c.exists(path) else []):
                n = int(c.get(f"{path}/{b}")[0])
                parts += [f"{b}-{p}" for p in range(n)]
            for pname, t in reference_assignment(parts, threads[topic], my_ids).items():
                decision[(topic, pname)] = t
        return decision

    def release(self) -> None:
        for (topic, pname) in list(self.owned):
            with contextlib.suppress(NoNodeError):
                self.client.delete(f"/consumers/{self.group}/owners/{topic}/{pname}")
        self.owned.clear()

    def rebalance(self) -> bool:
        """One Scala attempt: release all, claim all-or-nothing.  True on success."""
        decision = self.compute()
        self.release()
        created = []
        for (topic, pname), thread in sorted(decision.items()):
            path = f"/consumers/{self.group}/owners/{topic}/{pname}"
            self.client.ensure_path(f"/consumers/{self.group}/owners/{topic}")
            try:
                self.client.create(path, thread.encode(), ephemeral=True)
                created.append(path)
            except NodeExistsError:
                for p in created:
                    self.client.delete(p)
                return False
        self.owned = dict(decision)
        return True

    def rebalance_until(self, timeout: float = 10.0) -> dict[tuple[str, str], str]:
        """Retry (like syncedRebalance, with no retry limit) until an attempt succeeds and
        the claimed set is still what the current view says."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.rebalance() and self.compute() == self.owned:
                return self.owned
            time.sleep(0.05)  # backoff between attempts, as rebalance.backoff.ms
        raise AssertionError(f"{self.consumer_id} could not rebalance: owns {self.owned}, "
                             f"wants {self.compute()}")

    def commit(self, topic: str, pname: str, offset: int) -> None:
        path = f"/consumers/{self.group}/offsets/{topic}/{pname}"
        self.client.ensure_path(f"/consumers/{self.group}/offsets/{topic}")
        if self.client.exists(path):
            self.client.set(path, str(offset).encode())
        else:
            self.client.create(path, str(offset).encode())


def owners(client: KazooClient, group: str, topic: str) -> dict[str, str]:
    path = f"/consumers/{group}/owners/{topic}"
    if not client.exists(path):
        return {}
    out = {}
    for p in client.get_children(path):
        with contextlib.suppress(NoNodeError):
            out[p] = client.get(f"{path}/{p}")[0].decode()
    return out


def offsets(client: KazooClient, group: str, topic: str) -> dict[str, int]:
    path = f"/consumers/{group}/offsets/{topic}"
    if not client.exists(path):
        return {}
    return {p: int(client.get(f"{path}/{p}")[0]) for p in client.get_children(path)}


# --------------------------------------------------------------------------------------------
# A member in a subprocess
# --------------------------------------------------------------------------------------------

MEMBER = Path(__file__).with_name("member_proc.py")
ROOT = Path(__file__).resolve().parents[3]


class ProcMember:
    """A `member_proc.py` child (a member in its own process, for kill -9).

    Its output lines are collected by a reader thread."""

    def __init__(self, zk_connect: str, topic: str, session_ms: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), zk_connect, GROUP, topic, str(session_ms)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.lines: list[str] = []
        self.consumer_id: str | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("READY "):
                self.consumer_id = line.split()[1]
            self.lines.append(line.rstrip("\n"))

    def messages(self) -> list[tuple[str, int, int, str]]:
        out = []
        for line in list(self.lines):
            if line.startswith("MSG "):
                _, part, off, nxt, value = line.split(" ", 4)
                out.append((part, int(off), int(nxt), value))
        return out

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
