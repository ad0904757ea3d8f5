"""Request parsing as the 0.7.2 broker does it (``api/*Request.readFrom``), over TCP.

The reference reads its fields off the frame and never checks what is left, and
``Utils.readShortString`` turns a negative length into a null topic; a produced compressed
wrapper is iterated with ByteBufferMessageSet's rules at every nesting level.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from broker_wire import Wire, frame, raw_fetch, raw_offsets, raw_produce

from zkconsumer.protocol import (
    Compression,
    FetchResponse,
    compress,
    decode_fetch_response,
    decode_message_set,
    decode_multifetch_response,
    decode_offsets_response,
    encode_message_set,
)

MSG = encode_message_set([b"0123456789"])  # 20 bytes
NULL_TOPIC = struct.pack(">h", -1)  # readShortString: length -1 -> null, nothing more read


def gzip_wrapper(inner: bytes) -> bytes:
    """A magic-1 entry with attributes 1 (gzip) around arbitrary inner bytes."""
    payload = compress(Compression.GZIP, inner)
    body = struct.pack(">BBI", 1, 1, zlib.crc32(payload)) + payload  # magic, attrs, crc
    return struct.pack(">i", len(body)) + body


@pytest.fixture
def broker(dev_broker):
    return dev_broker(zk=False, num_partitions=2)


@pytest.fixture
def wire(broker):
    with Wire(broker.host, broker.port) as w:
        yield w


def test_trailing_bytes_after_any_request_are_ignored(broker, wire):
    wire.send_raw(raw_produce("t", 0, MSG))
    junk = b"trailing junk"
    produce = frame(0, raw_produce("t", 0, MSG)[6:] + junk)
    wire.send_raw(produce)
    fetch = frame(1, raw_fetch("t", 0, 0, 1000)[6:] + junk)
    assert decode_fetch_response(wire.request(fetch)) == FetchResponse(0, MSG + MSG)
    offsets = frame(4, raw_offsets("t", 0, -1, 5)[6:] + junk)
    assert decode_offsets_response(wire.request(offsets)).offsets == (40, 0)
    # a multifetch whose count is smaller than the parts sent: the rest is never read
    multi = frame(2, struct.pack(">h", 1) + raw_fetch("t", 0, 20, 100)[6:]
                  + raw_fetch("t", 0, 0, 100)[6:])
    got = decode_multifetch_response(wire.request(multi))
    assert [(p.error, p.messages) for p in got.responses] == [(0, MSG)]


def test_null_topic_fetch_answers_error_minus_1(wire):
    null_fetch = NULL_TOPIC + struct.pack(">iqi", 0, 0, 100)  # partition, offset, max size
    assert decode_fetch_response(wire.request(frame(1, null_fetch))) == FetchResponse(-1, b"")
    wire.produce("t", 1, MSG)
    multi = frame(2, struct.pack(">h", 2) + null_fetch + raw_fetch("t", 1, 0, 100)[6:])
    got = decode_multifetch_response(wire.request(multi))
    assert [(p.error, p.messages) for p in got.responses] == [(-1, b""), (0, MSG)]


@pytest.mark.parametrize("body", [
    frame(0, NULL_TOPIC + struct.pack(">ii", 0, len(MSG)) + MSG),  # produce
    frame(4, NULL_TOPIC + struct.pack(">iqi", 0, -1, 1)),  # offsets
], ids=["produce", "offsets"])
def test_null_topic_produce_or_offsets_closes(broker, wire, body):
    wire.send_raw(body)
    assert wire.is_closed()
    assert list(broker.log_dir.iterdir()) == []


@pytest.mark.parametrize("inner", [b"\x00", b"\x00\x00\x00"], ids=["1 byte", "3 bytes"])
def test_wrapper_whose_inner_set_is_under_4_bytes_is_accepted(broker, wire, inner):
    """Fewer than 4 inner bytes are no message (internalIterator), not an error: 0 messages."""
    wrapper = gzip_wrapper(inner)
    wire.produce("w", 0, wrapper)
    assert wire.end("w", 0) == 0  # stored, but 0 messages flush nothing
    wire.produce("w", 0, MSG)
    assert wire.end("w", 0) == len(wrapper) + len(MSG)
    assert wire.fetch("w", 0, 0).messages == wrapper + MSG


def test_nested_wrapper_with_a_partial_inner_tail_is_accepted(broker, wire):
    """Inner sets may end in a partial message at every level; only whole ones count."""
    innermost = encode_message_set([b"a", b"b"]) + MSG[:7]
    wrapper = gzip_wrapper(gzip_wrapper(innermost) + MSG[:5])
    wire.produce("n", 0, wrapper)
    assert wire.end("n", 0) == len(wrapper)  # 2 messages counted: flushed at once
    assert wire.fetch("n", 0, 0).messages == wrapper


def test_nested_wrapper_whose_first_inner_message_does_not_fit_closes(broker, wire):
    wire.produce("n", 0, gzip_wrapper(gzip_wrapper(MSG[:-1])))
    assert wire.is_closed()
    with Wire(broker.host, broker.port) as w:
        assert w.end("n", 0) == 0  # the log was created, nothing appended
        assert decode_message_set(w.fetch("n", 0, 0).messages).messages == []


@pytest.mark.parametrize("tail", [b"\x00\x00\x00\x04\x01", b"\x00\x00\x00\x01", b"\x00\x00"],
                         ids=["length 4, 1 byte", "length 1, 0 bytes", "2 bytes"])
def test_short_length_that_does_not_fit_is_a_partial_tail(broker, wire, tail):
    """internalIterator checks ``remaining < size`` before anything else: cut off, not closed."""
    wire.produce("p", 0, MSG + tail)
    assert wire.end("p", 0) == len(MSG)
    wire.produce("p", 0, gzip_wrapper(MSG + tail))  # inside a wrapper too
    assert wire.fetch("p", 0, 20).messages == gzip_wrapper(MSG + tail)


def test_short_length_that_fits_closes(broker, wire):
    wire.produce("p", 0, MSG + b"\x00\x00\x00\x02\x01\x00")  # a 2-byte "message": no header
    assert wire.is_closed()
