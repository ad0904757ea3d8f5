"""``zkconsumer bench group``: consumer-group throughput and rebalance time, on a dev cluster.

Starts its own ZooKeeper and two dev brokers (`DevCluster`, subprocess brokers so they do not
share the consumer's GIL) in a temporary directory, then runs two kinds of case:

* ``consume <size> socket.buffersize=<n>`` -- one `GroupConsumer` member over 8 partitions
  (4 per broker) that were preloaded with ``--messages`` messages of 100 B / 1 KiB, once with
  0.7's default receive buffer (64 KiB) and once with 1 MiB; timed from the end of
  ``start()`` until the last message was handed out and looked at, through
  `GroupConsumer.poll_view` (``messages``: CRC-checked deep decode, one `Message` object per
  message, auto-ack) and through `GroupConsumer.poll_columns` (``columns``: the batch path,
  runs of decoded columns, no object per message).  Figure: msg/s, MB/s of payload
  (MB = 10**6 bytes) and the process's CPU seconds per million messages; the line names the
  decoder (compiled or pure, `zkconsumer.protocol.DECODER`).
* ``rebalance <N> members`` -- N-1 members share 64 partitions (32 per broker, one message
  each; every member drains its messages on a thread, as an application would); then
  member N joins.  Timed from the last member's ``start()`` call
  until every partition is owned by the member the assignment gives it, and fetched by it
  (its first fetch answered).  Also reports failed rebalances (must be 0).

Each case prints one line ending with the figure.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from zkconsumer.client.connection import BrokerConnection
from zkconsumer.client.produce import produce
from zkconsumer.consumer import ConsumerConfig, GroupConsumer, Subscription, assign
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.errors import ZkConsumerError
from zkconsumer.protocol import DECODER, encode_message_set

HELP = "consumer group: one member's throughput over 8 partitions; rebalance time of N members"

SIZES = {"100B": 100, "1KiB": 1024}
APIS = ("messages", "columns")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=400_000,
                        help="messages per throughput case (default 400000; 1KiB uses 3/4)")
    parser.add_argument("--size", action="append", choices=list(SIZES),
                        help="only this payload size (repeatable)")
    parser.add_argument("--members", default="2,4,8,16",
                        help="member counts of the rebalance cases (default 2,4,8,16)")
    parser.add_argument("--partitions", type=int, default=64,
                        help="partitions of the rebalance cases (default 64)")
    parser.add_argument("--backoff-ms", type=int, default=2000,
                        help="rebalance.backoff.ms of the members (default 2000, the 0.7 "
                             "default)")
    parser.add_argument("--fetch-size", type=int, default=1048576,
                        help="fetch.size of the consuming member (default 1048576)")
    parser.add_argument("--socket-buffer", default="65536,1048576",
                        help="socket.buffersize values of the consuming member, one case "
                             "each (default 65536,1048576: the 0.7 default and 1 MiB)")
    parser.add_argument("--skip-consume", action="store_true")
    parser.add_argument("--skip-rebalance", action="store_true")
    parser.add_argument("--api", action="append", choices=APIS,
                        help="consume API (repeatable; default both): messages = poll_view, "
                             "one Message per message; columns = poll_columns, the batch "
                             "path")


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise ZkConsumerError(f"bench: timed out waiting for {what}")
        time.sleep(0.002)


def _preload(cluster: DevCluster, topic: str, per_broker: int, size: int, total: int) -> None:
    payload_set = [bytes([65 + i % 26]) * size for i in range(1000)]
    n_parts = per_broker * len(cluster.brokers)
    per_part = total // n_parts
    for broker in cluster.brokers:
        host, _, port = broker.address.rpartition(":")
        with BrokerConnection(host, int(port)) as conn:
            for p in range(per_broker):
                left = per_part
                while left > 0:
                    n = min(left, 1000 if size <= 100 else 500)
                    produce(conn, topic, p, encode_message_set(payload_set[:n]), confirm=False)
                    left -= n
            # one confirmed produce per partition: everything before it was appended
            for p in range(per_broker):
                produce(conn, topic, p, encode_message_set([b"end"]), confirm=True)


def _config(cluster: DevCluster, group: str, **kw: object) -> ConsumerConfig:
    values: dict[str, object] = dict(group_id=group, zk_connect=cluster.zk_connect,
                                     autocommit_interval_ms=1000, fetcher_backoff_ms=100,
                                     zk_connection_timeout_ms=30000)
    values.update(kw)
    return ConsumerConfig(**values)  # type: ignore[arg-type]


def consume_case(cluster: DevCluster, label: str, size: int, messages: int,
                 fetch_size: int = 1048576, socket_buffer: int = 65536,
                 api: str = "messages") -> str:
    topic = f"bench-{label}-{socket_buffer}-{api}"
    _preload(cluster, topic, 4, size, messages)
    total = (messages // 8) * 8 + 8  # + one "end" marker per partition
    consumer = GroupConsumer(_config(cluster, f"bench-consume-{topic}", fetch_size=fetch_size,
                                     socket_buffersize=socket_buffer),
                             Subscription(topics={topic: 1}))
    _wait(lambda: len(cluster_topics(cluster, topic)) == 2, 30, "topic registration")
    consumer.start()
    got = 0
    payload = 0
    started = time.perf_counter()
    cpu = time.process_time()
    try:
        while got < total:
            if api == "columns":  # the batch path: runs of columns, nothing per message
                cols = consumer.poll_columns(100_000, timeout=10.0)
                if not cols:
                    raise ZkConsumerError(f"bench: stalled after {got} of {total} messages")
                payload += cols.payload_bytes
                got += len(cols)
                continue
            batch = consumer.poll_view(100_000, timeout=10.0)
            if not batch:
                raise ZkConsumerError(f"bench: stalled after {got} of {total} messages")
            for m in batch:  # every message becomes a Message and is looked at
                payload += len(m.value)
            got += len(batch)
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    finally:
        consumer.close()
    return (f"group consume {api} 1 member 8 partitions {label} "
            f"socket.buffersize={socket_buffer} {DECODER}: {got / elapsed:,.0f} msg/s "
            f"({payload / elapsed / 1e6:,.1f} MB/s, {cpu / got * 1e6:.2f} CPU s/M msg)")


def cluster_topics(cluster: DevCluster, topic: str) -> list[str]:
    from zkconsumer.zk.session import ZkSession

    with ZkSession(cluster.zk_connect) as session:
        return session.get_children(f"/brokers/topics/{topic}")


def rebalance_case(cluster: DevCluster, n: int, partitions: int, backoff_ms: int) -> str:
    topic = f"rb-{n}"
    per_broker = partitions // len(cluster.brokers)
    for broker in cluster.brokers:
        host, _, port = broker.address.rpartition(":")
        with BrokerConnection(host, int(port)) as conn:
            for p in range(per_broker):
                produce(conn, topic, p, encode_message_set([b"x"]), confirm=True)
    _wait(lambda: len(cluster_topics(cluster, topic)) == len(cluster.brokers), 30, "topic")
    group = f"bench-rb-{n}"
    members: list[GroupConsumer] = []
    stop = threading.Event()
    drainers: list[threading.Thread] = []

    def drain(member: GroupConsumer) -> None:  # members are applications that consume
        while not stop.is_set():
            member.poll_batch(10_000, timeout=0.05)

    def join(member: GroupConsumer) -> None:
        member.start()
        members.append(member)
        t = threading.Thread(target=drain, args=(member,), daemon=True)
        t.start()
        drainers.append(t)

    try:
        for i in range(n - 1):
            join(GroupConsumer(_config(cluster, group, consumer_id=f"m{i:02d}",
                                       rebalance_backoff_ms=backoff_ms),
                               Subscription(topics={topic: 1})))
        all_parts = [f"{b.broker_id}-{p}" for b in cluster.brokers for p in range(per_broker)]
        _settle(members, all_parts, 60)
        last = GroupConsumer(_config(cluster, group, consumer_id=f"m{n - 1:02d}",
                                     rebalance_backoff_ms=backoff_ms),
                             Subscription(topics={topic: 1}))
        before = sum(m.stats.failed_rebalances for m in members)
        started = time.perf_counter()
        join(last)
        _settle(members, all_parts, 60)
        elapsed = time.perf_counter() - started
        failed = sum(m.stats.failed_rebalances for m in members) - before
    finally:
        stop.set()
        for m in members:
            m.close()
        for t in drainers:
            t.join(5)
    return (f"group rebalance {n} members {partitions} partitions (failed rebalances: "
            f"{failed}): {elapsed * 1000:,.0f} ms")


def _settle(members: list[GroupConsumer], parts: list[str], timeout: float) -> None:
    """Every partition owned by the member the assignment names, and fetched by it."""
    threads = [f"{m.consumer_id}-0" for m in members]

    def done() -> bool:
        for m in members:
            want = sorted(assign(parts, threads, [f"{m.consumer_id}-0"]))
            states = m._coordinator.ownership.states()
            have = sorted(name for (_, name) in states)
            if have != want:
                return False
            if any(s.log_end is None for s in states.values()):
                return False
        return True

    _wait(done, timeout, "the group to settle")


def main(args: argparse.Namespace) -> int:
    sizes = args.size or list(SIZES)
    counts = [int(x) for x in args.members.split(",") if x.strip()]
    per_broker = max(1, args.partitions // 2)
    with tempfile.TemporaryDirectory(prefix="zkc-bench-group-") as tmp, \
            DevCluster(Path(tmp), brokers=2, num_partitions=4,
                       topic_partitions={f"rb-{n}": per_broker for n in counts},
                       flush_interval=10000, flush_interval_ms=50,
                       flush_scheduler_interval_ms=50) as cluster:
        if not args.skip_consume:
            for label in sizes:
                size = SIZES[label]
                n = args.messages if size <= 100 else args.messages * 3 // 4
                for buf in (int(x) for x in args.socket_buffer.split(",") if x.strip()):
                    for api in args.api or list(APIS):
                        print(consume_case(cluster, label, size, n, args.fetch_size, buf,
                                           api), flush=True)
        if not args.skip_rebalance:
            for n in counts:
                print(rebalance_case(cluster, n, per_broker * 2, args.backoff_ms),
                      flush=True)
    return 0
