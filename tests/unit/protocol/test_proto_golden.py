"""Golden byte vectors for the 0.7 wire format, built field by field with struct.pack.

Each expected frame is assembled independently of the codec, one commented field at a time,
from the layouts in REFERENCE §4 (which wins over the seed documents).
"""

from __future__ import annotations

import struct
import zlib

from zkconsumer.protocol import (
    Compression,
    FetchRequest,
    FetchResponse,
    MultiFetchRequest,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    decode_fetch_response,
    decode_message_set,
    decode_multifetch_response,
    decode_offsets_response,
    decode_request,
    encode_fetch_response,
    encode_message,
    encode_message_set,
    encode_multifetch_response,
    encode_offsets_response,
    encode_request,
    fetch_response_header,
    multifetch_part_header,
    multifetch_response_header,
)


def crc(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


# --- messages --------------------------------------------------------------------------------


def test_magic1_message_golden() -> None:
    payload = b"hello"
    expected = b"".join([
        struct.pack(">i", 1 + 1 + 4 + 5),  # length: magic + attributes + crc + payload
        struct.pack(">b", 1),  # magic 1
        struct.pack(">b", 0),  # attributes: no compression
        struct.pack(">I", crc(payload)),  # CRC32 of the payload only
        payload,  # payload
    ])
    assert encode_message(payload) == expected
    assert expected.hex() == "0000000b0100" + "3610a686" + payload.hex()


def test_magic0_message_golden() -> None:
    payload = b"hello"
    expected = b"".join([
        struct.pack(">i", 1 + 4 + 5),  # length: magic + crc + payload
        struct.pack(">b", 0),  # magic 0 (no attributes byte)
        struct.pack(">I", crc(payload)),  # CRC32 of the payload
        payload,
    ])
    assert encode_message(payload, magic=0) == expected
    assert decode_message_set(expected).messages == [(0, 14, b"hello")]


def test_crc_is_unsigned_and_excludes_header() -> None:
    # b"\xff" has CRC 0xff000000: the top bit set shows it is stored unsigned.
    payload = b"\xff"
    entry = encode_message(payload, compression=Compression.GZIP)
    assert entry[6:10] == bytes.fromhex("ff000000")
    # Flipping the attributes byte does not change the CRC: it only covers the payload.
    assert encode_message(payload)[6:10] == entry[6:10]


def test_empty_payload_message() -> None:
    expected = struct.pack(">ibbI", 6, 1, 0, 0)  # length 6, magic 1, attrs 0, crc32(b"") = 0
    assert encode_message(b"") == expected
    assert decode_message_set(expected).messages == [(0, 10, b"")]


def test_wrapper_message_layout() -> None:
    inner = encode_message(b"a") + encode_message(b"bc")
    wrapper = encode_message_set([b"a", b"bc"], compression=Compression.GZIP)
    (length,) = struct.unpack_from(">i", wrapper)  # length
    assert length == len(wrapper) - 4
    assert wrapper[4] == 1  # magic 1
    assert wrapper[5] == 1  # attributes: gzip
    compressed = wrapper[10:]
    assert struct.unpack_from(">I", wrapper, 6)[0] == crc(compressed)  # CRC of the compressed bytes
    assert zlib.decompress(compressed, 31) == inner  # payload = gzip(inner message set)


def test_snappy_wrapper_attribute() -> None:
    wrapper = encode_message_set([b"x"], compression=Compression.SNAPPY)
    assert wrapper[5] == 2  # attributes: snappy
    assert wrapper[10:18] == b"\x82SNAPPY\x00"


# --- requests --------------------------------------------------------------------------------


def _topic(name: bytes) -> bytes:
    return struct.pack(">h", len(name)) + name  # int16 length + bytes


def test_produce_request_golden() -> None:
    messages = encode_message(b"m1")
    body = b"".join([
        struct.pack(">h", 0),  # request type PRODUCE
        _topic(b"test"),  # topic
        struct.pack(">i", 3),  # partition
        struct.pack(">i", len(messages)),  # message set size
        messages,  # message set
    ])
    frame = struct.pack(">i", len(body)) + body  # int32 size of everything after it
    req = ProduceRequest("test", 3, messages)
    assert encode_request(req) == frame
    assert decode_request(frame[4:]) == req


def test_fetch_request_golden() -> None:
    body = b"".join([
        struct.pack(">h", 1),  # request type FETCH
        _topic(b"test"),  # topic
        struct.pack(">i", 0),  # partition
        struct.pack(">q", 2**40 + 5),  # offset (int64)
        struct.pack(">i", 1048576),  # max size
    ])
    frame = struct.pack(">i", len(body)) + body
    req = FetchRequest("test", 0, 2**40 + 5, 1048576)
    assert encode_request(req) == frame
    assert frame.hex() == "00000018" "0001" "00047465737400000000" "0000010000000005" "00100000"
    assert decode_request(frame[4:]) == req


def test_multifetch_request_golden() -> None:
    body = b"".join([
        struct.pack(">h", 2),  # request type MULTIFETCH
        struct.pack(">h", 2),  # count
        _topic(b"a"), struct.pack(">iqi", 0, 0, 100),  # fetch 1: topic, partition, offset, max
        _topic(b"bb"), struct.pack(">iqi", 7, 42, 200),  # fetch 2
    ])
    frame = struct.pack(">i", len(body)) + body
    req = MultiFetchRequest((FetchRequest("a", 0, 0, 100), FetchRequest("bb", 7, 42, 200)))
    assert encode_request(req) == frame
    assert decode_request(frame[4:]) == req


def test_multiproduce_request_golden() -> None:
    m1 = encode_message(b"x")
    m2 = encode_message_set([b"y", b"z"])
    body = b"".join([
        struct.pack(">h", 3),  # request type MULTIPRODUCE
        struct.pack(">h", 2),  # count
        _topic(b"t1"), struct.pack(">ii", 0, len(m1)), m1,  # topic, partition, size, set
        _topic(b"t2"), struct.pack(">ii", 1, len(m2)), m2,
    ])
    frame = struct.pack(">i", len(body)) + body
    req = MultiProduceRequest((ProduceRequest("t1", 0, m1), ProduceRequest("t2", 1, m2)))
    assert encode_request(req) == frame
    assert decode_request(frame[4:]) == req


def test_offsets_request_golden() -> None:
    body = b"".join([
        struct.pack(">h", 4),  # request type OFFSETS
        _topic(b"test"),  # topic
        struct.pack(">i", 1),  # partition
        struct.pack(">q", -2),  # time: EARLIEST
        struct.pack(">i", 1),  # max number of offsets
    ])
    frame = struct.pack(">i", len(body)) + body
    req = OffsetsRequest("test", 1, -2, 1)
    assert encode_request(req) == frame
    assert decode_request(frame[4:]) == req


# --- responses -------------------------------------------------------------------------------


def test_fetch_response_golden() -> None:
    messages = encode_message_set([b"one", b"two"])
    frame = b"".join([
        struct.pack(">i", 2 + len(messages)),  # size = error code + set
        struct.pack(">h", 0),  # error code
        messages,
    ])
    assert encode_fetch_response(0, messages) == frame
    assert fetch_response_header(0, len(messages)) == frame[:6]
    assert decode_fetch_response(frame[4:]) == FetchResponse(0, messages)


def test_multifetch_response_golden() -> None:
    s1 = encode_message(b"abc")
    parts = b"".join([
        struct.pack(">i", 2 + len(s1)), struct.pack(">h", 0), s1,  # part 1: size, error, set
        struct.pack(">i", 2), struct.pack(">h", 3),  # part 2: empty set, WrongPartition
        struct.pack(">i", 2), struct.pack(">h", 1),  # part 3: OffsetOutOfRange
    ])
    frame = b"".join([
        struct.pack(">i", 2 + len(parts)),  # size of everything after it
        struct.pack(">h", 0),  # top-level error: always 0
        parts,
    ])
    responses = [FetchResponse(0, s1), FetchResponse(3, b""), FetchResponse(1, b"")]
    assert encode_multifetch_response(responses) == frame
    assert multifetch_response_header(2 + len(parts)) == frame[:6]
    assert multifetch_part_header(0, len(s1)) == frame[6:12]
    decoded = decode_multifetch_response(frame[4:])
    assert decoded.error == 0
    assert list(decoded.responses) == responses


def test_offsets_response_golden() -> None:
    frame = b"".join([
        struct.pack(">i", 2 + 4 + 16),  # size
        struct.pack(">h", 0),  # error
        struct.pack(">i", 2),  # count
        struct.pack(">q", 5000),  # offsets, descending (flushed end first)
        struct.pack(">q", 0),
    ])
    assert encode_offsets_response([5000, 0]) == frame
    decoded = decode_offsets_response(frame[4:])
    assert decoded.offsets == (5000, 0)
    assert decoded.error == 0


def test_empty_offsets_response_golden() -> None:
    frame = struct.pack(">ihi", 6, 0, 0)  # size 6, error 0, count 0
    assert encode_offsets_response([]) == frame
    assert decode_offsets_response(frame[4:]).offsets == ()
