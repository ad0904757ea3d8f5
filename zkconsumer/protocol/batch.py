"""A decoded message set as one compact batch: int64 arrays and one buffer of payloads.

Job: the batch form of `decode_message_set` for consumers that handle whole fetches (file
sinks, the mirror, Arrow/Spark): no Python object per message until one is asked for.

Layout (Arrow's ``large_binary`` layout, so an Arrow array is built without copying values)::

    offsets        array('q'), n     byte offset of the shallow entry holding message i
    next_offsets   array('q'), n     the offset to commit after message i
    value_offsets  array('q'), n + 1 value_offsets[0] == 0; message i's payload is
                                     values[value_offsets[i]:value_offsets[i + 1]]
    values         bytes             every payload back to back

Invariants
    * Same walk, same checks, same offsets (wrapper semantics included), same ``valid_bytes``
      and same errors as `decode_message_set`: ``batch.messages()`` equals
      ``decode_message_set(...).messages`` for the same arguments (tested on both paths).
    * Compiled path: one pass in C (``_speedups.decode_batch``); pure path: built from
      `decode_message_set_pure`, so it is correct everywhere and fast where compiled.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from zkconsumer.errors import DecodeError, LocalProtocolError
from zkconsumer.protocol import messageset
from zkconsumer.protocol.constants import DEFAULT_MAX_INFLATED
from zkconsumer.protocol.messageset import Buffer

__all__ = ["MessageBatch", "decode_batch", "decode_batch_valid_prefix"]


class MessageBatch:
    """One decoded message set in columns (see the module docstring for the layout)."""

    __slots__ = ("next_offsets", "offsets", "size", "valid_bytes", "value_offsets", "values")

    def __init__(self, offsets: array[int], next_offsets: array[int],
                 value_offsets: array[int], values: bytes, valid_bytes: int,
                 size: int) -> None:
        self.offsets = offsets
        self.next_offsets = next_offsets
        self.value_offsets = value_offsets
        self.values = values
        #: Bytes of whole shallow messages from the buffer start (the next fetch starts here).
        self.valid_bytes = valid_bytes
        #: ``len(buffer)``.
        self.size = size

    @classmethod
    def from_messages(cls, messages: Sequence[tuple[int, int, bytes]], valid_bytes: int = 0,
                      size: int = 0) -> MessageBatch:
        """Columns of ``(offset, next_offset, payload)`` tuples (the inverse of `messages`)."""
        value_offsets = array("q", [0])
        total = 0
        for _, _, payload in messages:
            total += len(payload)
            value_offsets.append(total)
        return cls(array("q", [m[0] for m in messages]), array("q", [m[1] for m in messages]),
                   value_offsets, b"".join(m[2] for m in messages), valid_bytes, size)

    def __len__(self) -> int:
        return len(self.offsets)

    def __repr__(self) -> str:
        return (f"<MessageBatch {len(self)} messages, {len(self.values)} payload bytes, "
                f"valid_bytes={self.valid_bytes}>")

    @property
    def incomplete(self) -> bool:
        """The buffer ends inside a message (normal for fetch responses)."""
        return self.valid_bytes < self.size

    @property
    def too_large(self) -> bool:
        """Non-empty but not one whole message: the first message exceeds the fetch size."""
        return self.size > 0 and self.valid_bytes == 0

    def value(self, i: int) -> bytes:
        """The payload of message ``i`` (a copy; `values` holds them all)."""
        ends = self.value_offsets
        return self.values[ends[i]:ends[i + 1]]

    def payloads(self) -> list[bytes]:
        """Every payload, in order."""
        ends = self.value_offsets
        values = self.values
        return [values[ends[i]:ends[i + 1]] for i in range(len(self.offsets))]

    def messages(self) -> list[tuple[int, int, bytes]]:
        """The `decode_message_set` form: ``(offset, next_offset, payload)`` per message."""
        return list(zip(self.offsets, self.next_offsets, self.payloads(), strict=True))


def _int64s(raw: bytes) -> array[int]:
    out = array("q")
    out.frombytes(raw)
    return out


def decode_batch(buf: Buffer, base_offset: int = 0, *,
                 max_inflated: int = DEFAULT_MAX_INFLATED, deep: bool = True) -> MessageBatch:
    """`decode_message_set` into a `MessageBatch` (same arguments, checks and errors).

    Offsets are int64 columns (as Kafka's are): a ``base_offset`` that would push them out of
    that range is `LocalProtocolError`.
    """
    ext = messageset._speedups
    limit = messageset._C_LIMIT
    data = buf if type(buf) is bytes else bytes(buf)
    if not -(2**63) <= base_offset <= 2**63 - 1 - len(data):
        raise LocalProtocolError(f"base_offset {base_offset} does not fit an int64 batch")
    if ext is not None and -limit < base_offset < limit and -limit < max_inflated < limit:
        offsets, nexts, ends, values, valid = ext.decode_batch(
            data, base_offset, max_inflated, deep, messageset._inflate_at)
        return MessageBatch(_int64s(offsets), _int64s(nexts), _int64s(ends), values, valid,
                            len(data))
    decoded = messageset.decode_message_set_pure(data, base_offset, max_inflated=max_inflated,
                                                 deep=deep)
    return MessageBatch.from_messages(decoded.messages, decoded.valid_bytes, len(data))


def decode_batch_valid_prefix(buf: Buffer, base_offset: int = 0, *,
                              max_inflated: int = DEFAULT_MAX_INFLATED,
                              deep: bool = True) -> tuple[MessageBatch, DecodeError | None]:
    """`decode_batch` that returns corruption instead of raising it (see `prefix`).

    ``(batch, None)`` for a clean set; else the batch of every whole message before the
    corrupt entry (``valid_bytes`` ends where it starts, ``size`` is still ``len(buf)``) and
    the error.  The extra decode of the prefix happens on the error path only.
    """
    try:
        return decode_batch(buf, base_offset, max_inflated=max_inflated, deep=deep), None
    except DecodeError as exc:
        cut = exc.offset - base_offset if exc.offset is not None else 0
        if not 0 <= cut <= len(buf):
            cut = 0  # cannot happen: decode errors are anchored inside the buffer
        prefix = decode_batch(memoryview(buf)[:cut], base_offset, max_inflated=max_inflated,
                              deep=deep)
        prefix.size = len(buf)
        return prefix, exc
