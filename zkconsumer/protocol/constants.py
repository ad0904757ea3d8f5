"""Wire constants of Kafka 0.7: request type ids, error codes, codecs, special offsets.

Every number here is a value on the wire (api/RequestKeys.scala, common/ErrorMapping.scala,
message/CompressionCodec.scala, api/OffsetRequest.scala of Kafka 0.7.2).  They are `IntEnum`s so
they compare equal to the raw ints a decoder reads and print with a name in logs.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "CODEC_MASK",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_MAX_INFLATED",
    "EARLIEST_TIME",
    "LATEST_TIME",
    "MAGIC_V0",
    "MAGIC_V1",
    "RANDOM_PARTITION",
    "Compression",
    "ErrorCode",
    "RequestType",
]


class RequestType(IntEnum):
    """The int16 that follows the size of every request frame (api/RequestKeys.scala)."""

    PRODUCE = 0
    FETCH = 1
    MULTIFETCH = 2
    MULTIPRODUCE = 3
    OFFSETS = 4


class ErrorCode(IntEnum):
    """int16 error codes of responses (common/ErrorMapping.scala).

    Exceptions the 0.7.2 broker does not map (InvalidTopicException, MessageSizeTooLarge...)
    arrive as `UNKNOWN`.  `zkconsumer.errors.BrokerError.for_code` turns a code into an error.
    """

    UNKNOWN = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    INVALID_MESSAGE = 2
    WRONG_PARTITION = 3
    INVALID_FETCH_SIZE = 4


class Compression(IntEnum):
    """The codec in the low two bits of a magic-1 message's attributes byte.

    The value 3 is not a codec: a message carrying it is corrupt (`CompressionError`).
    """

    NONE = 0
    GZIP = 1
    SNAPPY = 2


#: ``time`` of an offsets request: the flushed end of the log (returned first).
LATEST_TIME = -1
#: ``time`` of an offsets request: the start of the first segment.
EARLIEST_TIME = -2
#: Produce partition meaning "broker, pick one at random" (ProducerRequest.RandomPartition).
RANDOM_PARTITION = -1

MAGIC_V0 = 0
MAGIC_V1 = 1
#: attributes & CODEC_MASK is the compression codec.
CODEC_MASK = 0x03

#: Cap on the decompressed size of one wrapper message (and of its nested wrappers together):
#: a defence against decompression bombs in data fetched from a broker or read from disk.
DEFAULT_MAX_INFLATED = 64 * 1024 * 1024
#: Largest frame `FrameReader` accepts by default (the 0.7 broker's max.socket.request.bytes).
DEFAULT_MAX_FRAME = 104857600
