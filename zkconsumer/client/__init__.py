"""client layer: the only code with sockets (see docs/architecture.md and docs/client.md).

* `BrokerConnection` -- one blocking, in-order request/response connection to a broker;
* `SimpleConsumer` -- fetch / multifetch / offsets and a robust per-partition iterator;
* `produce` / `multiproduce` / `confirmed_produce` -- produce requests, optionally confirmed;
* `query_offsets`, `parse_broker_address` -- small helpers for the CLIs.
"""

from __future__ import annotations

from zkconsumer.client.connection import BrokerConnection, parse_broker_address
from zkconsumer.client.produce import confirmed_produce, multiproduce, produce
from zkconsumer.client.simple import FetchedMessage, SimpleConsumer, query_offsets

__all__ = [
    "BrokerConnection",
    "FetchedMessage",
    "SimpleConsumer",
    "confirmed_produce",
    "multiproduce",
    "parse_broker_address",
    "produce",
    "query_offsets",
]
