"""SimpleConsumer against hung, dying and garbling brokers, and across a broker restart.

Whatever a broker does, the caller gets a typed error naming ``host:port`` within the socket
timeout -- never a hang, never a raw `struct.error` / `OSError` / `DecodeError` from a frame
the client read whole -- and the connection recovers on the next call.
"""

from __future__ import annotations

import struct
import time
from typing import Any

import pytest
from fixtures.waiting import wait_until
from robustkit import ScriptedBroker, blackhole, reply

from zkconsumer.client import BrokerConnection, SimpleConsumer, produce
from zkconsumer.errors import BrokerConnectionError, ConnectionClosedError
from zkconsumer.protocol import FetchRequest, encode_message_set


def _consumer(broker: ScriptedBroker) -> SimpleConsumer:
    return SimpleConsumer(broker.host, broker.port, socket_timeout=0.3)


def test_a_hung_broker_times_out_naming_host_and_port() -> None:
    hung = ScriptedBroker(blackhole)
    try:
        with _consumer(hung) as consumer:
            started = time.monotonic()
            with pytest.raises(BrokerConnectionError, match=rf"timed out.*{hung.address}"):
                consumer.fetch("t", 0, 0)
            assert time.monotonic() - started < 5
            assert not consumer.conn.connected
    finally:
        hung.close()


@pytest.mark.parametrize(("answer", "close", "error", "match"), [
    (struct.pack(">ih", 100, 0) + b"x" * 10, True, ConnectionClosedError, "closed"),  # dies
    (struct.pack(">ih", 100, 0) + b"x" * 10, False, BrokerConnectionError, "timed out"),  # hangs
    (struct.pack(">i", -5) + b"xxxx", False, BrokerConnectionError, "invalid response size -5"),
    (struct.pack(">ih", 1, 0), False, BrokerConnectionError, "invalid response size 1"),
    (b"\x7f\xff\xff\xff\x00\x00", False, BrokerConnectionError, "invalid response size"),
])
def test_broken_fetch_frames(answer: bytes, close: bool, error: type[Exception],
                             match: str) -> None:
    broker = ScriptedBroker(reply(answer, close=close))
    try:
        with _consumer(broker) as consumer, pytest.raises(error, match=match) as info:
            consumer.fetch("t", 0, 0)
        assert broker.address in str(info.value)
    finally:
        broker.close()


@pytest.mark.parametrize(("call", "answer", "match"), [
    # a whole frame whose offsets list is shorter than its count
    ("offsets", struct.pack(">ihi", 6, 0, 5), "undecodable offsets response"),
    ("offsets", struct.pack(">ih", 2, 0), "undecodable offsets response"),
    # a multifetch answer with fewer parts than fetches (was: silently [], partitions dropped)
    ("multifetch", struct.pack(">ih", 2, 0), r"undecodable multifetch \(0 part"),
    # a multifetch part that claims more bytes than the frame holds (was: TruncatedError,
    # which killed the group consumer's fetcher thread)
    ("multifetch", struct.pack(">ihih", 8, 0, 50, 0), "undecodable multifetch response"),
])
def test_undecodable_responses_are_connection_errors(call: str, answer: bytes,
                                                     match: str) -> None:
    broker = ScriptedBroker(reply(answer))
    try:
        with _consumer(broker) as consumer:
            with pytest.raises(BrokerConnectionError, match=match) as info:
                if call == "offsets":
                    consumer.offsets("t", 0, -1)
                else:
                    consumer.multifetch([FetchRequest("t", 0, 0, 100)])
            assert broker.address in str(info.value)
            assert not consumer.conn.connected  # the stream is not trusted any more
    finally:
        broker.close()


def test_iter_messages_across_a_broker_restart_loses_nothing(dev_broker: Any) -> None:
    broker = dev_broker(zk=False)
    values = [b"value-%03d" % i for i in range(30)]
    with BrokerConnection(broker.host, broker.port) as conn:
        produce(conn, "rs", 0, encode_message_set(values), confirm=True)
    consumer = SimpleConsumer(broker.host, broker.port, socket_timeout=5.0, fetch_size=64)
    it = consumer.iter_messages("rs", 0, 0)
    seen = [next(it) for _ in range(5)]
    broker = dev_broker.restart(broker)  # mid-iteration: the connection under `it` is dead
    seen += list(it)
    assert [m.value for m in seen] == values
    broker.stop()
    # a broker that stays down ends the iteration with a typed error; resuming at the last
    # next_offset once it is back yields the rest exactly once
    it = consumer.iter_messages("rs", 0, seen[9].next_offset)
    with pytest.raises(BrokerConnectionError, match=f"{broker.host}:{broker.port}"):
        next(it)
    broker = dev_broker.restart(broker)
    rest = wait_until(lambda: [m.value for m in consumer.iter_messages(
        "rs", 0, seen[9].next_offset)], what="reconnect after the connect backoff")
    assert rest == values[10:]
    consumer.close()
