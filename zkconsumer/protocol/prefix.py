"""`decode_valid_prefix`: the whole messages in front of a corrupt one, and its error.

A fetch answer (or a file chunk) that holds a corrupt message usually holds valid messages
before it.  `decode_message_set` raises on the corrupt one and returns nothing, so a consumer
that parks at the start of the fetch hides those valid messages (hundreds of them in a 1 MiB
fetch).  This variant returns them, with the error, so the caller delivers them and parks
*at* the corrupt message (``error.offset``).

Invariant: ``decoded.valid_bytes`` ends exactly where the corrupt entry starts, so
``base_offset + valid_bytes == error.offset``; a compressed wrapper is one unit (a wrapper
with a bad inner message is not split: its error is anchored at the wrapper's start).
"""

from __future__ import annotations

from zkconsumer.errors import DecodeError
from zkconsumer.protocol.constants import DEFAULT_MAX_INFLATED
from zkconsumer.protocol.messageset import Buffer, DecodedSet, decode_message_set

__all__ = ["decode_valid_prefix"]


def decode_valid_prefix(buf: Buffer, base_offset: int = 0, *,
                        max_inflated: int = DEFAULT_MAX_INFLATED,
                        deep: bool = True) -> tuple[DecodedSet, DecodeError | None]:
    """``(decoded, error)``: as `decode_message_set`, but corruption is returned, not raised.

    Without corruption ``error`` is None and ``decoded`` is what `decode_message_set` returns.
    With it, ``decoded`` holds every whole message before the corrupt entry (``size`` is still
    ``len(buf)``).  Costs one extra decode of the prefix, on the error path only.
    """
    try:
        return decode_message_set(buf, base_offset, max_inflated=max_inflated, deep=deep), None
    except DecodeError as exc:
        cut = exc.offset - base_offset if exc.offset is not None else 0
        if not 0 <= cut <= len(buf):
            cut = 0  # cannot happen: decode errors are anchored inside the buffer
        prefix = decode_message_set(memoryview(buf)[:cut], base_offset,
                                    max_inflated=max_inflated, deep=deep)
        return DecodedSet(prefix.messages, prefix.valid_bytes, len(buf)), exc
