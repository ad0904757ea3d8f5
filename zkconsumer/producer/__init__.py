"""producer layer: the ZooKeeper-aware Kafka 0.7 producer (see docs/producer.md).

* `Producer` -- sync or async, ZooKeeper (``zk.connect``) or static (``broker.list``) mode;
* `ProducerConfig` -- 0.7 ``producer.properties`` names via `ProducerConfig.from_properties`;
* `ProducerStats` -- counters;
* pure partition logic in `zkconsumer.producer.partitioning`.
"""

from __future__ import annotations

from zkconsumer.producer.config import ProducerConfig, parse_codec
from zkconsumer.producer.partitioning import (
    BrokerPartition,
    PartitionChooser,
    bootstrap_partitions,
    merge_partitions,
    partitions_from_counts,
)
from zkconsumer.producer.producer import ErrorCallback, Producer
from zkconsumer.producer.stats import ProducerStats

__all__ = [
    "BrokerPartition",
    "ErrorCallback",
    "PartitionChooser",
    "Producer",
    "ProducerConfig",
    "ProducerStats",
    "bootstrap_partitions",
    "merge_partitions",
    "parse_codec",
    "partitions_from_counts",
]
