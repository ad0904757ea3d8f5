"""``zkconsumer bench monitor``: what one poll of ``zkconsumer monitor`` costs, by cluster size.

Starts its own ZooKeeper and two dev brokers (`DevCluster`, subprocess brokers) in a temporary
directory.  Topics have ``--partitions`` partitions (half on each broker) and are shared by
``--groups-per-topic`` groups (a topic is read by several applications, as on a real
cluster).  Every group is written the way a running 0.7 group looks: one member
registration, an owner znode and a committed offset per partition.  Then, for each
``--groups`` count, the monitor polls ``--polls`` times after a first poll and the line
reports the median cycle time (ZooKeeper reads, log ends, evaluation and window
bookkeeping), the ZooKeeper reads per cycle (the formula in
docs/operations.md, "Monitor") and the offsets requests per cycle (one per distinct
partition).  The first poll of a monitor reads every owner znode too (later polls reuse the
owners of unchanged owner directories); it is reported at the end of the line::

    monitor 500 groups x 100 partitions (50 topics): 3.21 s/cycle (median of 3), 53,155 ZooKeeper reads/cycle, 5,000 broker requests/cycle (first poll: 6.10 s, 103,155 reads)

Cases are cumulative: the 100-group case adds groups to the 10 of the first, and the monitor
sees every group present (``--groups`` counts are totals).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from zkconsumer.client import BrokerConnection, confirmed_produce
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.monitor.evaluator import EvalConfig
from zkconsumer.monitor.sampler import Sampler
from zkconsumer.monitor.service import Monitor
from zkconsumer.monitor.store import WindowStore
from zkconsumer.protocol import ProduceRequest, encode_message_set
from zkconsumer.zk.bulk import create_many
from zkconsumer.zk.paths import (
    BROKER_TOPICS,
    consumer_id_path,
    encode_offset,
    offset_path,
    owner_path,
)
from zkconsumer.zk.session import ZkSession

HELP = "cost of one monitor poll (cycle time, ZooKeeper reads) for 10, 100, 500 groups"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("examples:\n  zkconsumer bench monitor\n"
                     "  zkconsumer bench monitor --groups 10,100 --partitions 20 --polls 5")
    parser.add_argument("--groups", default="10,100,500", metavar="N,N,...",
                        help="total group counts, one case each (default: 10,100,500)")
    parser.add_argument("--partitions", type=int, default=100, metavar="N",
                        help="partitions per topic, split over 2 brokers (default: 100)")
    parser.add_argument("--groups-per-topic", type=int, default=10, metavar="N",
                        help="groups reading each topic (default: 10)")
    parser.add_argument("--polls", type=int, default=3, metavar="N",
                        help="timed polls per case, after one warm-up (default: 3)")


def _make_topic(cluster: DevCluster, topic: str, per_broker: int) -> None:
    """One message per partition: the brokers create the logs and register the topic."""
    for broker in cluster.brokers:
        with BrokerConnection(broker.host, broker.port) as conn:
            confirmed_produce(conn, [ProduceRequest(topic, p, encode_message_set([b"m"] * 3))
                                     for p in range(per_broker)])


def _write_groups(session: ZkSession, first: int, last: int, partitions: list[str],
                  groups_per_topic: int) -> None:
    nodes: list[tuple[str, bytes | None, bool]] = []
    for g in range(first, last):
        group, topic, cid = f"bench-g{g:04d}", f"bench-t{g // groups_per_topic:03d}", f"c{g}"
        nodes.append((consumer_id_path(group, cid), f'{{ "{topic}": 1 }}'.encode(), True))
        for name in partitions:
            nodes.append((owner_path(group, topic, name), f"{cid}-0".encode(), True))
            nodes.append((offset_path(group, topic, name), encode_offset(10), False))
    create_many(session, nodes)


def main(args: argparse.Namespace) -> int:
    counts = sorted(int(x) for x in args.groups.split(",") if x.strip())
    per_broker = max(1, args.partitions // 2)
    partitions = [f"{b}-{p}" for b in range(2) for p in range(per_broker)]
    with tempfile.TemporaryDirectory(prefix="zkc-bench-monitor-") as tmp, \
            DevCluster(Path(tmp), brokers=2, num_partitions=per_broker) as cluster, \
            ZkSession(cluster.zk_connect) as session:
        made_topics: set[int] = set()
        have = 0
        for total in counts:
            for t in range((total + args.groups_per_topic - 1) // args.groups_per_topic):
                if t not in made_topics:
                    _make_topic(cluster, f"bench-t{t:03d}", per_broker)
                    made_topics.add(t)
            _write_groups(session, have, total, partitions, args.groups_per_topic)
            have = total
            deadline = time.monotonic() + 60
            while len(session.get_children(BROKER_TOPICS)) < len(made_topics):
                if time.monotonic() > deadline:
                    raise TimeoutError("the brokers did not register the bench topics")
                time.sleep(0.05)
            sampler = Sampler(session, groups="^bench-g")
            monitor = Monitor(sampler, WindowStore(11), EvalConfig())
            try:
                started = time.perf_counter()
                first = monitor.poll_once()  # also opens the broker connections
                first_time, first_reads = time.perf_counter() - started, first.last_zk_reads
                times, reads, requests = [], [], []
                for _ in range(args.polls):
                    started = time.perf_counter()
                    state = monitor.poll_once()
                    times.append(time.perf_counter() - started)
                    reads.append(state.last_zk_reads)
                    requests.append(state.broker_requests_total)
                if len(state.groups) != total:
                    raise RuntimeError(f"monitor saw {len(state.groups)} groups, not {total}")
            finally:
                sampler.close()
            per_cycle = (requests[-1] - requests[0]) // max(len(requests) - 1, 1) \
                if len(requests) > 1 else requests[0]
            print(f"monitor {total} groups x {len(partitions)} partitions "
                  f"({len(made_topics)} topics): {statistics.median(times):.2f} s/cycle "
                  f"(median of {args.polls}), {statistics.median(reads):,.0f} ZooKeeper "
                  f"reads/cycle, {per_cycle:,} broker requests/cycle (first poll: "
                  f"{first_time:.2f} s, {first_reads:,} reads)", flush=True)
    return 0
