"""Sans-I/O codec for the Apache Kafka 0.7 wire protocol (see docs/protocol.md).

Everything a client, broker or log reader needs to turn bytes into values and back: request
and response frames, message sets (plain, gzip, xerial snappy, with the reference offset
semantics for compressed wrappers), frame reassembly, topic validation and the Java hash the
0.7 partitioner uses.  No sockets, threads, clocks or ZooKeeper here: only ``struct``, ``zlib``,
``isal`` and ``snappy``.  Malformed input raises only `zkconsumer.errors.DecodeError`
subclasses; misuse raises `zkconsumer.errors.LocalProtocolError`.

Message sets are decoded by a compiled walk (``_speedups.c``) when that optional extension is
built, else in pure Python; ``DECODER`` says which (``"compiled"`` or ``"pure"``, see `accel`),
and ``ZKCONSUMER_PURE=1`` in the environment forces the pure path.
"""

from __future__ import annotations

from zkconsumer.protocol.accel import IMPLEMENTATION as DECODER
from zkconsumer.protocol.batch import MessageBatch, decode_batch
from zkconsumer.protocol.compression import compress, decompress
from zkconsumer.protocol.constants import (
    DEFAULT_MAX_FRAME,
    DEFAULT_MAX_INFLATED,
    EARLIEST_TIME,
    LATEST_TIME,
    RANDOM_PARTITION,
    Compression,
    ErrorCode,
    RequestType,
)
from zkconsumer.protocol.framing import FrameReader
from zkconsumer.protocol.javahash import default_partition, java_string_hashcode
from zkconsumer.protocol.message import codec_of, encode_message, encode_message_set, read_shallow
from zkconsumer.protocol.messageset import (
    DecodedSet,
    SetInfo,
    ShallowMessage,
    active_decoder,
    decode_message_set,
    iter_shallow,
    validate_message_set,
)
from zkconsumer.protocol.requests import (
    FetchRequest,
    MultiFetchRequest,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    Request,
    decode_request,
    encode_request,
    encode_request_parts,
    request_type_of,
)
from zkconsumer.protocol.responses import (
    FetchResponse,
    MultiFetchResponse,
    OffsetsResponse,
    decode_fetch_response,
    decode_multifetch_response,
    decode_offsets_response,
    encode_fetch_response,
    encode_multifetch_response,
    encode_offsets_response,
    fetch_response_header,
    multifetch_part_header,
    multifetch_response_header,
    raise_for_error,
)
from zkconsumer.protocol.topics import validate_topic

__all__ = [
    "DECODER",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_MAX_INFLATED",
    "EARLIEST_TIME",
    "LATEST_TIME",
    "RANDOM_PARTITION",
    "Compression",
    "DecodedSet",
    "ErrorCode",
    "FetchRequest",
    "FetchResponse",
    "FrameReader",
    "MessageBatch",
    "MultiFetchRequest",
    "MultiFetchResponse",
    "MultiProduceRequest",
    "OffsetsRequest",
    "OffsetsResponse",
    "ProduceRequest",
    "Request",
    "RequestType",
    "SetInfo",
    "ShallowMessage",
    "active_decoder",
    "codec_of",
    "compress",
    "decode_batch",
    "decode_fetch_response",
    "decode_message_set",
    "decode_multifetch_response",
    "decode_offsets_response",
    "decode_request",
    "decompress",
    "default_partition",
    "encode_fetch_response",
    "encode_message",
    "encode_message_set",
    "encode_multifetch_response",
    "encode_offsets_response",
    "encode_request",
    "encode_request_parts",
    "fetch_response_header",
    "iter_shallow",
    "java_string_hashcode",
    "multifetch_part_header",
    "multifetch_response_header",
    "raise_for_error",
    "read_shallow",
    "request_type_of",
    "validate_message_set",
    "validate_topic",
]
