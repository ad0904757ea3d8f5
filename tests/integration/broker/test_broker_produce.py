"""Produce and multiproduce conformance: REFERENCE §4.2 produce rows and §4.8, over TCP.

A 0.7 broker never answers a produce; it *closes the connection* on a bad one.  So every
"accepted" case is checked with a later request on the same connection (the broker handles a
connection's requests in order), and every "rejected" case by the connection closing.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from broker_wire import Wire, frame, raw_produce

from zkconsumer.protocol import (
    Compression,
    FetchResponse,
    MultiProduceRequest,
    ProduceRequest,
    compress,
    decode_message_set,
    encode_message,
    encode_message_set,
)

MSG = encode_message_set([b"0123456789"])  # 20 bytes


def corrupt_crc(entry: bytes) -> bytes:
    """Flip the last payload byte of a one-message entry (the CRC no longer matches)."""
    return entry[:-1] + bytes([entry[-1] ^ 0xFF])


def entry(magic: int, attributes: int, payload: bytes, crc: int | None = None) -> bytes:
    """A message-set entry built by hand: int32 length, magic, [attributes,] crc, payload."""
    crc = zlib.crc32(payload) if crc is None else crc
    if magic == 0:
        body = struct.pack(">BI", 0, crc) + payload  # magic, crc
    else:
        body = struct.pack(">BBI", magic, attributes, crc) + payload  # magic, attributes, crc
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def broker(dev_broker):
    return dev_broker(zk=False, num_partitions=4, max_message_size=100, max_request_size=4096)


@pytest.fixture
def wire(broker):
    with Wire(broker.host, broker.port) as w:
        yield w


def end_of(broker, topic: str, partition: int) -> int:
    with Wire(broker.host, broker.port) as w:
        return w.end(topic, partition)


def test_good_produce_is_stored_byte_for_byte_and_connection_stays_open(broker, wire):
    data = encode_message_set([b"a", b"bb"]) + encode_message_set([b"zero"], magic=0)
    wire.produce("t", 2, data)
    assert wire.end("t", 2) == len(data)
    assert wire.fetch("t", 2, 0).messages == data
    assert (broker.log_dir / "t-2" / "00000000000000000000.kafka").read_bytes() == data


BAD_SETS = {
    "bad crc in the middle": MSG + corrupt_crc(MSG) + MSG,
    "bad magic": entry(2, 0, b"payload"),
    "unknown codec 3": entry(1, 3, b"payload"),
    "undecodable gzip": entry(1, int(Compression.GZIP), b"this is not gzip"),
    "undecodable snappy": entry(1, int(Compression.SNAPPY), b"\xff\xff\xff\xff\xff"),
    "bad crc inside a gzip set": encode_message(
        compress(Compression.GZIP, MSG + corrupt_crc(MSG)), compression=Compression.GZIP),
    "bad crc inside a snappy set": encode_message(
        compress(Compression.SNAPPY, corrupt_crc(MSG)), compression=Compression.SNAPPY),
    "message shorter than its header": struct.pack(">i", 3) + b"\x01\x00\x00",
    "negative length": struct.pack(">i", -1) + b"\x00" * 10,
    "truncated first message": MSG[:-2],
    "first message longer than the set": struct.pack(">i", 1000) + MSG,
}


@pytest.mark.parametrize("name", list(BAD_SETS))
def test_bad_set_closes_the_connection_and_writes_nothing(broker, wire, name):
    wire.produce("t", 0, MSG)
    assert wire.end("t", 0) == 20
    wire.produce("t", 0, BAD_SETS[name])
    assert wire.is_closed()
    assert end_of(broker, "t", 0) == 20
    assert (broker.log_dir / "t-0" / "00000000000000000000.kafka").read_bytes() == MSG


def test_bad_set_to_a_new_topic_still_creates_its_log(broker, wire):
    """getOrCreateLog runs before the set is validated (as in the reference)."""
    wire.produce("fresh", 1, corrupt_crc(MSG))
    assert wire.is_closed()
    segment = broker.log_dir / "fresh-1" / "00000000000000000000.kafka"
    assert segment.exists() and segment.stat().st_size == 0


def test_multiproduce_writes_the_parts_before_a_bad_part_only(broker, wire):
    wire.multiproduce([("a", 0, MSG), ("b", 1, MSG + MSG), ("a", 0, corrupt_crc(MSG)),
                       ("c", 0, MSG)])
    assert wire.is_closed()
    assert end_of(broker, "a", 0) == 20
    assert end_of(broker, "b", 1) == 40
    assert not (broker.log_dir / "c-0").exists()


def test_multiproduce_of_good_parts(broker, wire):
    wire.send(MultiProduceRequest((ProduceRequest("a", 0, MSG), ProduceRequest("a", 1, MSG),
                                   ProduceRequest("a", 0, MSG))))
    assert wire.end("a", 0) == 40
    assert wire.end("a", 1) == 20


def test_oversized_payload_is_dropped_silently_but_the_log_is_created(broker, wire):
    wire.produce("big", 3, [b"x" * 101])
    assert wire.end("big", 3) == 0  # connection still open; nothing stored
    segment = broker.log_dir / "big-3" / "00000000000000000000.kafka"
    assert segment.exists() and segment.stat().st_size == 0
    assert broker.broker.stats.dropped_sets == 1
    wire.produce("big", 3, [b"x" * 100])  # exactly max.message.size is fine
    assert wire.end("big", 3) == 110
    # one oversized message drops the whole set
    wire.produce("big", 3, [b"ok", b"y" * 200, b"ok"])
    assert wire.end("big", 3) == 110


def test_max_message_size_checks_the_shallow_wrapper_not_inner_messages(broker, wire):
    inner = [b"z" * 100] * 20  # 2000 bytes of payloads compress far below 100 bytes
    data = encode_message_set(inner, compression=Compression.GZIP)
    wire.produce("gz", 0, data)
    assert wire.end("gz", 0) == len(data)
    got = decode_message_set(wire.fetch("gz", 0, 0).messages).messages
    assert [p for _, _, p in got] == inner


def test_trailing_partial_message_is_cut_off(broker, wire):
    whole = MSG + encode_message_set([b"second"])
    wire.produce("t", 0, whole + MSG[:13])
    assert wire.end("t", 0) == len(whole)
    assert wire.fetch("t", 0, 0).messages == whole


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00"])
def test_empty_set_creates_the_log_with_an_empty_segment(broker, wire, data):
    wire.produce("empty", 2, data)
    assert wire.end("empty", 2) == 0
    segment = broker.log_dir / "empty-2" / "00000000000000000000.kafka"
    assert segment.exists() and segment.stat().st_size == 0


def test_request_larger_than_max_socket_request_bytes_closes(broker, wire):
    wire.produce("t", 0, encode_message_set([b"p" * 90] * 50))  # > 4096 bytes
    assert wire.is_closed()
    assert not (broker.log_dir / "t-0").exists()


@pytest.mark.parametrize("raw", [struct.pack(">i", 0), struct.pack(">i", -4),
                                 frame(7, b"\x00" * 10), frame(0, b"\x00\x01t"),
                                 struct.pack(">ib", 1, 0), frame(-1, b""),
                                 frame(3, struct.pack(">h", -1))],
                         ids=["size 0", "negative size", "unknown type", "truncated body",
                              "no request type", "type -1", "negative multiproduce count"])
def test_malformed_frames_close_the_connection(wire, raw):
    wire.send_raw(raw)
    assert wire.is_closed()


@pytest.mark.parametrize("partition", [4, -2, 1 << 20])
def test_partition_out_of_range_closes_and_creates_nothing(broker, wire, partition):
    wire.produce("t", partition, MSG)
    assert wire.is_closed()
    assert list(broker.log_dir.iterdir()) == []


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "x" * 256, "tab\there"])
def test_illegal_topic_closes_and_creates_nothing(broker, wire, topic):
    wire.send_raw(raw_produce(topic, 0, MSG))
    assert wire.is_closed()
    assert list(broker.log_dir.iterdir()) == []


def test_254_character_topic_cannot_get_a_log_dir(broker, wire):
    """It passes the validator, but ``<topic>-<p>`` exceeds the 255-byte file-name limit."""
    name = "n" * 254
    wire.produce(name, 0, MSG)
    assert wire.is_closed()
    with Wire(broker.host, broker.port) as w:
        assert w.fetch(name, 0, 0) == FetchResponse(0, b"")
        longest = "m" * 253
        w.produce(longest, 0, MSG)
        assert w.end(longest, 0) == 20


def test_random_partition_picks_partitions_in_range(broker, wire):
    for i in range(40):
        wire.produce("rnd", -1, [b"%02d" % i])
    ends = [wire.end("rnd", p) for p in range(4)]
    assert sum(ends) == 40 * 12
    assert sum(1 for e in ends if e) >= 2  # 40 random picks over 4 partitions
    assert sorted(p.name for p in broker.log_dir.iterdir()) == \
        sorted(f"rnd-{p}" for p in range(4) if ends[p])


def test_snappy_and_gzip_sets_are_stored_as_sent(broker, wire):
    gz = encode_message_set([b"g1", b"g2"], compression=Compression.GZIP)
    sn = encode_message_set([b"s1", b"s2", b"s3"], compression=Compression.SNAPPY)
    wire.produce("c", 0, gz)
    wire.produce("c", 0, sn)
    assert wire.end("c", 0) == len(gz) + len(sn)
    got = decode_message_set(wire.fetch("c", 0, 0).messages).messages
    assert [p for _, _, p in got] == [b"g1", b"g2", b"s1", b"s2", b"s3"]
