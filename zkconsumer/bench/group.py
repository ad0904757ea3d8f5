"""``zkconsumer bench group``: consumer-group throughput and rebalance time, on a dev cluster.

Starts its own ZooKeeper and two dev brokers (`DevCluster`, subprocess brokers so they do not
share the consumer's GIL) in a temporary directory, then runs two kinds of case:

* ``consume`` -- one `GroupConsumer` member over 8 partitions (4 per broker).  For each codec
  (none / gzip / snappy) and payload size (100 B / 1 KiB) one topic is preloaded ONCE with
  ``--messages`` messages (1 KiB: ``--messages-1k``) of text-like payloads (compressed topics: one
  wrapper per ``--wrap`` messages, 0.7's ``batch.size``), plus one uncompressed ``end``
  message per partition.  Every case then reads that topic from the start with a fresh group
  (``autooffset.reset=smallest``): once per ``socket.buffersize`` (0.7's default 64 KiB and
  1 MiB), per API -- `GroupConsumer.poll_view` (``messages``: CRC-checked deep decode, one
  `Message` object per message, auto-ack) and `GroupConsumer.poll_columns` (``columns``: the
  batch path, runs of decoded columns, no object per message) -- and per decoder path
  (``compiled``: the ``_speedups`` extension when it is built; ``pure``: the reference),
  switched in-process with `decoder_path` (the fetcher threads look the decoder up at every
  decode).  `Message`'s compiled base (``_speedups.Record``) is chosen at import, so a
  ``pure`` line still builds messages with it; ``ZKCONSUMER_PURE=1 zkconsumer bench group``
  runs everything pure (and has no compiled line).  Timed from the end of ``start()`` until the last message was handed out and
  looked at::

      group consume columns 1 member 8 partitions 100B none socket.buffersize=1048576 compiled: 6,145,446 msg/s (614.5 MB/s, 0.16 CPU s/M msg)

  MB/s counts payload bytes (MB = 10**6 bytes); the last figure is this process's CPU
  seconds (every thread: fetchers and the polling loop) per million messages.
* ``rebalance <N> members`` -- N-1 members share 64 partitions (32 per broker, one message
  each; every member drains its messages on a thread, as an application would); then
  member N joins.  Timed from the last member's ``start()`` call
  until every partition is owned by the member the assignment gives it, and fetched by it
  (its first fetch answered).  Also reports failed rebalances (must be 0).  These run on the
  default decoder.

Uncompressed consume lines end with what Scala 0.7.2's ``ZookeeperConsumerConnector`` reached
on this machine in the same shape (one stream over 8 partitions on real 0.7.2 brokers), as the
reference (issue 14).  Each case prints one line ending with the figure; lines starting with
``#`` are comments
(the default decoder and why; a compiled path that is not built is left out).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from zkconsumer.bench.codec import decoder_path
from zkconsumer.bench.produce import _payloads
from zkconsumer.client.connection import BrokerConnection
from zkconsumer.client.produce import produce
from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.consumer import ConsumerConfig, GroupConsumer, Subscription, assign
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.errors import ZkConsumerError
from zkconsumer.protocol import Compression, accel, encode_message_set

HELP = "consumer group: one member's throughput over 8 partitions; rebalance time of N members"

SIZES = {"100B": 100, "1KiB": 1024}
APIS = ("messages", "columns")
CODECS = ("none", "gzip", "snappy")
PATHS = ("compiled", "pure")

#: Scala 0.7.2's ZookeeperConsumerConnector on this machine against real 0.7.2 brokers, one
#: member, one stream over 8 partitions, uncompressed (issue 14): printed beside our figures.
SCALA_REFERENCE = {("none", "100B"): "4.3 M msg/s", ("none", "1KiB"): "~840 MB/s"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=2_000_000,
                        help="messages per 100B throughput topic (default 2000000: the batch "
                             "path reads them in about 0.2 s, so the member's start -- about "
                             "12 ms to the first message -- weighs under 10 percent)")
    parser.add_argument("--messages-1k", type=int, default=300_000, metavar="N",
                        help="messages per 1KiB throughput topic (default 300000, 300 MB)")
    parser.add_argument("--size", action="append", choices=list(SIZES),
                        help="only this payload size (repeatable)")
    parser.add_argument("--codec", action="append", choices=list(CODECS),
                        help="only this codec (repeatable; default: all)")
    parser.add_argument("--path", action="append", choices=list(PATHS),
                        help="only this decoder path (repeatable; default: both)")
    parser.add_argument("--wrap", type=int, default=200,
                        help="messages per compressed wrapper (default 200, 0.7's batch.size)")
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
    parser.epilog = ("examples:\n  zkconsumer bench group --skip-rebalance --codec none "
                     "--path compiled\n"
                     "  zkconsumer bench group --skip-consume --members 2,4\n\n"
                     "exit status: 0 done, 1 error, 2 usage")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _wait(pred: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise ZkConsumerError(f"bench: timed out waiting for {what}")
        time.sleep(0.002)


def _preload(cluster: DevCluster, topic: str, per_broker: int, size: int, total: int,
             codec: Compression = Compression.NONE, wrap: int = 200) -> int:
    """Write ``total // partitions`` messages of ``size`` bytes to every partition of
    ``topic`` (compressed: one wrapper per ``wrap`` messages), then one uncompressed ``end``
    message each; return the number of messages written."""
    payloads = _payloads(size)
    n_parts = per_broker * len(cluster.brokers)
    per_part = total // n_parts
    per_request = 1000 if size <= 100 else 500
    unit = wrap if codec != Compression.NONE else per_request
    # whole sets cut from the payload pool, cycled; a partition's last set may be shorter
    pool = [encode_message_set(payloads[i:i + unit], compression=codec)
            for i in range(0, len(payloads) - unit + 1, unit)]
    sets = [pool[i % len(pool)] for i in range(per_part // unit)]
    if per_part % unit:
        sets.append(encode_message_set(payloads[:per_part % unit], compression=codec))
    step = max(1, per_request // unit)  # sets per produce request
    requests = [b"".join(sets[i:i + step]) for i in range(0, len(sets), step)]
    end_marker = encode_message_set([b"end"])
    log_end = sum(len(data) for data in requests) + len(end_marker)
    for broker in cluster.brokers:
        host, _, port = broker.address.rpartition(":")
        with BrokerConnection(host, int(port)) as conn:
            for p in range(per_broker):
                for data in requests:
                    produce(conn, topic, p, data, confirm=False)
            # one confirmed produce per partition: everything before it was appended
            for p in range(per_broker):
                produce(conn, topic, p, end_marker, confirm=True)
        # until the broker's flush shows it all: else the first case would start on a
        # partial log and wait out the fetcher's backoff
        with SimpleConsumer(host, int(port)) as reader:
            _wait(partial(_flushed, reader, topic, per_broker, log_end), 30,
                  f"{topic} to be flushed")
    return (per_part + 1) * n_parts


def _flushed(reader: SimpleConsumer, topic: str, partitions: int, log_end: int) -> bool:
    return all(reader.latest_offset(topic, p) >= log_end for p in range(partitions))


def _config(cluster: DevCluster, group: str, **kw: object) -> ConsumerConfig:
    values: dict[str, object] = dict(group_id=group, zk_connect=cluster.zk_connect,
                                     autocommit_interval_ms=1000, fetcher_backoff_ms=100,
                                     zk_connection_timeout_ms=30000)
    values.update(kw)
    return ConsumerConfig(**values)  # type: ignore[arg-type]


def consume_case(cluster: DevCluster, topic: str, total: int, fetch_size: int = 1048576,
                 socket_buffer: int = 65536, api: str = "messages",
                 path: str = "compiled") -> tuple[float, float, float]:
    """Read all ``total`` messages of ``topic`` with a fresh one-member group on decoder
    ``path``: (msg/s, payload MB/s, CPU seconds per million messages)."""
    group = f"bench-consume-{topic}-{socket_buffer}-{api}-{path}"
    got = 0
    payload = 0
    with decoder_path(path):  # fetcher threads decode on it: it is read at every call
        consumer = GroupConsumer(_config(cluster, group, fetch_size=fetch_size,
                                         socket_buffersize=socket_buffer),
                                 Subscription(topics={topic: 1}))
        consumer.start()
        started = time.perf_counter()
        cpu = time.process_time()
        try:
            while got < total:
                if api == "columns":  # the batch path: runs of columns, nothing per message
                    cols = consumer.poll_columns(100_000, timeout=10.0)
                    if not cols:
                        raise ZkConsumerError(f"bench: stalled after {got} of {total} "
                                              f"messages")
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
    if got != total:
        raise ZkConsumerError(f"bench: read {got} messages from {topic}, expected {total}")
    return got / elapsed, payload / elapsed / 1e6, cpu / got * 1e6


def _wait_registered(cluster: DevCluster, topic: str) -> None:
    """Until every broker has registered ``topic`` in ZooKeeper (members see its partitions)."""
    _wait(lambda: len(cluster_topics(cluster, topic)) == len(cluster.brokers), 30,
          f"registration of {topic}")


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
    _wait_registered(cluster, topic)
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
            states = m.claimed()
            have = sorted(name for (_, name) in states)
            if have != want:
                return False
            if any(s.log_end is None for s in states.values()):
                return False
        return True

    _wait(done, timeout, "the group to settle")


def main(args: argparse.Namespace) -> int:
    sizes = args.size or list(SIZES)
    codecs = args.codec or list(CODECS)
    paths = [p for p in (args.path or list(PATHS))
             if p == "pure" or accel.speedups is not None]
    counts = [int(x) for x in args.members.split(",") if x.strip()]
    buffers = [int(x) for x in args.socket_buffer.split(",") if x.strip()]
    per_broker = max(1, args.partitions // 2)
    with tempfile.TemporaryDirectory(prefix="zkc-bench-group-") as tmp, \
            DevCluster(Path(tmp), brokers=2, num_partitions=4,
                       topic_partitions={f"rb-{n}": per_broker for n in counts},
                       flush_interval=10000, flush_interval_ms=50,
                       flush_scheduler_interval_ms=50) as cluster:
        if not args.skip_consume:
            print(f"# decoder: {accel.IMPLEMENTATION} by default; {accel.REASON}", flush=True)
            if accel.speedups is not None and "pure" in paths:
                print("# pure = the pure decoder, switched in this process; Message objects "
                      "still come from the compiled base (ZKCONSUMER_PURE=1 makes all pure)",
                      flush=True)
            for codec_name in codecs:
                codec = Compression[codec_name.upper()]
                for label in sizes:
                    size = SIZES[label]
                    n = args.messages if size <= 100 else args.messages_1k
                    topic = f"bench-{codec_name}-{label}"
                    total = _preload(cluster, topic, 4, size, n, codec, args.wrap)
                    _wait_registered(cluster, topic)
                    for buf in buffers:
                        for api in args.api or list(APIS):
                            for path in paths:
                                rate, mbps, cpu = consume_case(cluster, topic, total,
                                                               args.fetch_size, buf, api, path)
                                scala = SCALA_REFERENCE.get((codec_name, label))
                                print(f"group consume {api} 1 member 8 partitions {label} "
                                      f"{codec_name} socket.buffersize={buf} {path}: "
                                      f"{rate:,.0f} msg/s ({mbps:,.1f} MB/s, "
                                      f"{cpu:.2f} CPU s/M msg)"
                                      + (f"  [Scala 0.7.2 consumer: {scala}]" if scala else ""),
                                      flush=True)
        if not args.skip_rebalance:
            for n in counts:
                print(rebalance_case(cluster, n, per_broker * 2, args.backoff_ms),
                      flush=True)
    return 0
