"""Batch encoding of message sets for the producer's send path.

Job: turn the payloads of one (topic, partition) set into the wire bytes, byte for byte what
`zkconsumer.protocol.encode_message_set` (magic 1) produces, at a lower cost per message.  The
protocol function loops in bytecode (a pack, a CRC and two appends per message); here every
per-message step runs inside C iterators (``map`` over ``len``, ``crc32`` and the header
``Struct.pack``) and the headers and payloads are interleaved by slice assignment, so a batch
of small messages costs about a third less.  Tests hold the two encoders to the same bytes.

Invariants: the CRC is IEEE CRC32 of the payload (zlib's for small payloads, where it has less
call overhead than isal's; the protocol's, isal when present, for larger ones -- the values
are identical); a payload too long to frame makes this fall back to the protocol encoder,
which raises its `LocalProtocolError`.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from itertools import repeat
from operator import add

from zkconsumer.protocol import Compression, compress, encode_message, encode_message_set
from zkconsumer.protocol.message import HEADER_V1, MAX_PAYLOAD, crc32

__all__ = ["encode_set"]

#: Average payload size below which zlib's crc32 beats isal's (call overhead dominates).
_SMALL = 512


def encode_set(payloads: Sequence[bytes], codec: Compression = Compression.NONE) -> bytes:
    """``encode_message_set(payloads, compression=codec)``, faster for many messages."""
    n = len(payloads)
    if n < 4:
        return encode_message_set(payloads, compression=codec)
    lengths = list(map(len, payloads))
    total = sum(lengths)
    if total > MAX_PAYLOAD and max(lengths) > MAX_PAYLOAD:
        return encode_message_set(payloads, compression=codec)  # raises the framing error
    crc = zlib.crc32 if total < _SMALL * n else crc32
    headers = list(map(HEADER_V1.pack, map(add, lengths, repeat(6, n)), repeat(1, n),
                       repeat(0, n), map(crc, payloads)))
    parts: list[bytes] = [b""] * (2 * n)
    parts[::2] = headers
    parts[1::2] = payloads
    plain = b"".join(parts)
    if codec == Compression.NONE:
        return plain
    return encode_message(compress(codec, plain), compression=codec, magic=1)
