"""The balanced consumer group of Kafka 0.7, interoperable with Scala consumers.

Public API (docs/architecture.md, docs/consumer.md)::

    from zkconsumer.consumer import ConsumerConfig, Subscription, GroupConsumer

Modules: `config` (0.7 properties), `properties` (Java .properties reader), `subscription`
(static / wildcard TopicCount), `assignment` (the pure rebalance decision), `view` (reading
the group from ZooKeeper), `ownership` (claim / release / commit), `fetcher` (one thread per
broker), `delivery` (bounded chunk queues), `coordinator` (watches, rebalance loop, session
handling), `group` (the facade), `groupinfo` (describe / verify a group), `cli`
(``zkconsumer group``).
"""

from zkconsumer.consumer.assignment import assign, assign_topics
from zkconsumer.consumer.columns import Columns, PartitionRun
from zkconsumer.consumer.config import ConsumerConfig
from zkconsumer.consumer.group import GroupConsumer
from zkconsumer.consumer.message import (
    ConsumerListener,
    ConsumerStats,
    Message,
    MessageBatch,
    latest_claim,
)
from zkconsumer.consumer.subscription import Subscription
from zkconsumer.properties import load_properties, parse_properties

__all__ = [
    "Columns",
    "ConsumerConfig",
    "ConsumerListener",
    "ConsumerStats",
    "GroupConsumer",
    "Message",
    "MessageBatch",
    "PartitionRun",
    "Subscription",
    "assign",
    "assign_topics",
    "latest_claim",
    "load_properties",
    "parse_properties",
]
