"""Executor-side read errors name the option to change and the broker-partition (issue 22.16).

Before: ``MessageTooLargeError: message at t/0 offset 0 ... does not fit in
max_fetch_size=64; raise it`` (a keyword of our client, not the option ``maxFetchSize``, and
no broker), and a misaligned start did not say it came from ``startingOffsets``.  The reader
runs here as an executor runs it (no Spark needed), against a real dev broker.
"""

from __future__ import annotations

from typing import Any

import pytest

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.errors import MessageTooLargeError, MisalignedOffsetError
from zkconsumer.protocol import encode_message_set
from zkconsumer.spark.planning import LogRange
from zkconsumer.spark.reader import read_log_range

SET = encode_message_set([b"x" * 100, b"y" * 100])  # two messages of 110 bytes each


def _broker(dev_broker: Any) -> LogRange:
    b = dev_broker(5, zk=False)
    with BrokerConnection(b.host, b.port) as conn:
        produce(conn, "events", 0, SET, confirm=True)
    return LogRange("events", 5, 0, b.host, b.port, 0, len(SET))


def test_a_message_larger_than_max_fetch_size_names_the_option(dev_broker: Any) -> None:
    r = _broker(dev_broker)
    with pytest.raises(MessageTooLargeError) as info:
        list(read_log_range(r, fetch_size=64, max_fetch_size=64))
    assert str(info.value) == ("events/5-0: the message at offset 0 of 110 bytes does not fit "
                               "in maxFetchSize=64 bytes: raise the option maxFetchSize")


def test_a_start_inside_a_message_names_starting_offsets(dev_broker: Any) -> None:
    r = _broker(dev_broker)
    inside = LogRange(r.topic, r.broker_id, r.partition, r.host, r.port, 7, r.end)
    with pytest.raises(MisalignedOffsetError) as info:
        list(read_log_range(inside))
    assert str(info.value) == ("option startingOffsets: offset 7 of events/5-0 is not a "
                               "message boundary: it is inside the message [0, 110), start at "
                               "0 or 110")
