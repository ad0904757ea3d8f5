"""The Kafka 0.7.2-compatible dev broker (``zkconsumer broker``); see docs/dev-broker.md.

Layers, each in its own module: `config` (BrokerConfig, 0.7 property names), `properties`
(the .properties reader), `topics` (topic and directory names), `log` (one partition's
segments), `manager` (all logs, flushing, retention), `handlers` (requests -> response plans,
no sockets), `registration` (ZooKeeper), `server` (sockets, sendfile, lifecycle), `cli`.
"""

from zkconsumer.broker.config import BrokerConfig
from zkconsumer.broker.server import Broker

__all__ = ["Broker", "BrokerConfig"]
