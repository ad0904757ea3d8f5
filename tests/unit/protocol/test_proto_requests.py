"""Request/response codec edge cases: validation on encode, structure-only checks on decode."""

from __future__ import annotations

import struct

import pytest

from zkconsumer.errors import (
    BrokerError,
    DecodeError,
    InvalidTopicError,
    LocalProtocolError,
    OffsetOutOfRangeError,
    TruncatedError,
    UnknownBrokerError,
    WrongPartitionError,
)
from zkconsumer.protocol import (
    ErrorCode,
    FetchRequest,
    MultiFetchRequest,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    RequestType,
    decode_fetch_response,
    decode_multifetch_response,
    decode_offsets_response,
    decode_request,
    encode_message,
    encode_offsets_response,
    encode_request,
    raise_for_error,
    request_type_of,
)

REQUESTS = [
    ProduceRequest("t", 0, encode_message(b"m")),
    FetchRequest("t", 1, 2, 3),
    MultiFetchRequest((FetchRequest("a", 0, 0, 10), FetchRequest("b", 1, 5, 20))),
    MultiProduceRequest((ProduceRequest("a", 0, b""), ProduceRequest("b", 2, b"xyz"))),
    OffsetsRequest("t", 0, -1, 1),
]


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_every_truncation_raises_truncated(req: object) -> None:
    body = encode_request(req)[4:]  # type: ignore[arg-type]
    for cut in range(len(body)):
        with pytest.raises(TruncatedError):
            decode_request(body[:cut])


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_trailing_garbage_is_rejected(req: object) -> None:
    body = encode_request(req)[4:]  # type: ignore[arg-type]
    with pytest.raises(DecodeError) as info:
        decode_request(body + b"\x00")
    assert info.value.offset == len(body)


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: type(r).__name__)
def test_decode_accepts_bytearray_and_memoryview(req: object) -> None:
    body = encode_request(req)[4:]  # type: ignore[arg-type]
    assert decode_request(bytearray(body)) == req
    assert decode_request(memoryview(body)) == req


def test_request_type_of() -> None:
    assert request_type_of(encode_request(REQUESTS[2])[4:]) is RequestType.MULTIFETCH
    with pytest.raises(TruncatedError):
        request_type_of(b"\x00")
    with pytest.raises(DecodeError):
        request_type_of(struct.pack(">h", 5))  # no request type 5 in 0.7
    with pytest.raises(DecodeError):
        decode_request(struct.pack(">h", -1) + b"\x00" * 20)


def test_decode_does_not_validate_topic_names() -> None:
    """The broker must be able to answer -1 for an illegal topic, so decoding succeeds."""
    for raw in [b"", b"..", b"a/b", b"\x00", "caf\u00e9".encode(), b"\xff\xfe"]:
        body = struct.pack(">hh", 1, len(raw)) + raw + struct.pack(">iqi", 0, 0, 100)
        req = decode_request(body)
        assert isinstance(req, FetchRequest)
        assert req.topic.encode("utf-8", "replace") == raw or "\ufffd" in req.topic


def test_negative_lengths_and_counts() -> None:
    with pytest.raises(DecodeError):  # topic length -1
        decode_request(struct.pack(">hh", 1, -1) + b"\x00" * 16)
    with pytest.raises(DecodeError):  # message set size -1
        decode_request(struct.pack(">hh", 0, 1) + b"t" + struct.pack(">ii", 0, -1))
    with pytest.raises(DecodeError):  # multifetch count -1
        decode_request(struct.pack(">hh", 2, -1))
    assert decode_request(struct.pack(">hh", 2, 0)) == MultiFetchRequest(())


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "caf\u00e9", "x" * 256, "tab\tname"])
def test_encode_validates_topics(topic: str) -> None:
    with pytest.raises(InvalidTopicError):
        encode_request(FetchRequest(topic, 0, 0, 100))
    with pytest.raises(InvalidTopicError):
        encode_request(MultiProduceRequest((ProduceRequest("ok", 0, b""),
                                            ProduceRequest(topic, 0, b""))))


@pytest.mark.parametrize("req", [
    FetchRequest("t", 2**31, 0, 1),  # partition beyond int32
    FetchRequest("t", 0, 2**63, 1),  # offset beyond int64
    OffsetsRequest("t", 0, -1, -(2**31) - 1),
    MultiFetchRequest(tuple(FetchRequest("t", 0, 0, 1) for _ in range(32768))),
])
def test_encode_rejects_out_of_range_fields(req: object) -> None:
    with pytest.raises(LocalProtocolError):
        encode_request(req)  # type: ignore[arg-type]


def test_encode_rejects_non_requests() -> None:
    with pytest.raises(LocalProtocolError):
        encode_request("fetch please")  # type: ignore[arg-type]


def test_produce_accepts_bytearray_messages() -> None:
    frame = encode_request(ProduceRequest("t", 0, bytearray(b"abc")))  # type: ignore[arg-type]
    assert decode_request(frame[4:]) == ProduceRequest("t", 0, b"abc")


# --- responses -------------------------------------------------------------------------------


def test_response_truncations() -> None:
    with pytest.raises(TruncatedError):
        decode_fetch_response(b"\x00")
    with pytest.raises(TruncatedError):
        decode_multifetch_response(b"")
    good = struct.pack(">h", 0) + struct.pack(">ih", 5, 0) + b"abc"
    assert decode_multifetch_response(good).responses[0].messages == b"abc"
    for cut in range(3, len(good)):
        with pytest.raises(TruncatedError):
            decode_multifetch_response(good[:cut])
    with pytest.raises(DecodeError):  # part size smaller than its error code
        decode_multifetch_response(struct.pack(">hih", 0, 1, 0))
    body = encode_offsets_response([3, 2, 1])[4:]
    for cut in range(len(body)):
        with pytest.raises(TruncatedError):
            decode_offsets_response(body[:cut])
    with pytest.raises(DecodeError):
        decode_offsets_response(body + b"\x00")
    with pytest.raises(DecodeError):
        decode_offsets_response(struct.pack(">hi", 0, -1))


def test_offsets_response_with_only_an_error() -> None:
    assert decode_offsets_response(struct.pack(">h", -1)).error == -1
    assert decode_offsets_response(encode_offsets_response([], error=3)[4:]).error == 3


def test_raise_for_error() -> None:
    raise_for_error(ErrorCode.NONE)
    with pytest.raises(OffsetOutOfRangeError) as info:
        raise_for_error(1, topic="t", partition=0, offset=99)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("t", 0, 99)
    with pytest.raises(WrongPartitionError):
        raise_for_error(ErrorCode.WRONG_PARTITION)
    with pytest.raises(UnknownBrokerError):
        raise_for_error(-1)
    with pytest.raises(BrokerError):
        raise_for_error(77)


def test_error_codes_match_errors_registry() -> None:
    for code in ErrorCode:
        if code != ErrorCode.NONE:
            assert BrokerError.for_code(int(code)).code == code
