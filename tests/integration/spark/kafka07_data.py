"""Known data on a real cluster for the Spark integration tests (see conftest.py).

The `produced_cluster` fixture starts two dev brokers (ids 0 and 1, two partitions each,
300-byte segments so every partition has several segment files) registered in the test's ZooKeeper chroot, and
produces plain, gzip and snappy message sets with the client's confirmed produce.  The
expected rows are computed independently of the data source, from the bytes that were sent:
a partition's log is the concatenation of the message sets produced to it, so decoding that
concatenation gives every (offset, next_offset, value) a fetch must return.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import Compression, decode_message_set, encode_message_set

Row = tuple[str, int, int, int, int, bytes]


@dataclass
class ProducedCluster:
    zk_connect: str
    brokers: list[Any]
    topic: str
    logs: dict[tuple[int, int], bytearray] = field(default_factory=dict)
    payloads: dict[tuple[int, int], list[bytes]] = field(default_factory=dict)

    def produce(self, broker_index: int, partition: int, payloads: list[bytes],
                compression: Compression = Compression.NONE) -> None:
        b = self.brokers[broker_index]
        data = encode_message_set(payloads, compression=compression)
        with BrokerConnection(b.host, b.port) as conn:
            produce(conn, self.topic, partition, data, confirm=True)
        self.logs.setdefault((b.broker_id, partition), bytearray()).extend(data)
        self.payloads.setdefault((b.broker_id, partition), []).extend(payloads)

    def rows(self) -> list[Row]:
        out: list[Row] = []
        for (bid, p), log in self.logs.items():
            decoded = decode_message_set(bytes(log))
            assert decoded.valid_bytes == len(log)
            assert [m[2] for m in decoded.messages] == self.payloads[(bid, p)]
            out += [(self.topic, bid, p, o, n, v) for o, n, v in decoded.messages]
        return sorted(out)

    def latest(self) -> dict[str, dict[str, int]]:
        return {self.topic: {f"{b}-{p}": len(log) for (b, p), log in self.logs.items()}}


def fill(cluster: ProducedCluster, rounds: int, tag: str = "") -> None:
    """Produce ``rounds`` rounds of plain, gzip and snappy sets to all four partitions."""
    for r in range(rounds):
        for bi in range(2):
            for p in range(2):
                pre = f"{tag}r{r}-b{bi}-p{p}".encode()
                cluster.produce(bi, p, [pre + b"-plain-%d" % i for i in range(7)])
                cluster.produce(bi, p, [pre + b"-gzip-%d" % i for i in range(5)],
                                Compression.GZIP)
                cluster.produce(bi, p, [pre + b"-snappy-%d" % i + b"x" * 50 for i in range(4)],
                                Compression.SNAPPY)


def collect_rows(df: Any) -> list[Row]:
    return sorted((r.topic, r.broker_id, r.partition, r.offset, r.next_offset, bytes(r.value))
                  for r in df.collect())
