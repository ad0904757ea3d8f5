"""Is a byte offset a message boundary?  `check_alignment` asks the broker.

0.7 offsets are byte positions, and a 0.7.2 broker serves the raw bytes from whatever position
a fetch names (so does the dev broker).  A committed offset that falls *inside* a message --
a bad import, a hand edit, a tool that added a byte count to the wrong base -- therefore reads
as garbage: an absurd length (which a consumer takes for a message larger than its fetch
size), a bad magic byte or a CRC mismatch.  The Scala consumer reports exactly that
(InvalidMessageSizeException "possible causes ... log corruption") and stops; we name it.

Detection rule (exact, bounded): message boundaries are known at every segment start (an
offsets request with time -1 and a large count returns every segment start plus the log
end, Log.getOffsetsBefore).  From the last segment start at or before ``offset`` we walk the
length prefixes forward (one fetch covers many messages; only the int32 lengths are read)
until a boundary equals ``offset`` (aligned) or jumps over it (misaligned: ``offset`` lies in
``[before, after)``).  A misaligned verdict is confirmed by decoding the message
``[before, after)`` (CRC-checked), so a corrupt length on the way yields "unknown", never a
false "misaligned".  The walk stops after ``max_scan`` bytes (a huge segment): unknown.

Cost: only callers on an error path use it (a fetch that failed at its very first offset,
or an offsets tool validating a value), never the consumer's hot path.
"""

from __future__ import annotations

import struct
from typing import NamedTuple, Protocol

from zkconsumer.errors import DecodeError, MisalignedOffsetError
from zkconsumer.protocol import LATEST_TIME, FetchResponse, decode_message_set

__all__ = ["Alignment", "Broker", "check_alignment", "misaligned_error"]


class Broker(Protocol):
    """The two requests the walk needs -- what `SimpleConsumer` offers (which uses this module,
    so it is named structurally here rather than imported)."""

    def offsets(self, topic: str, partition: int, time: int,
                max_offsets: int = 1) -> list[int]: ...

    def fetch(self, topic: str, partition: int, offset: int,
              max_size: int | None = None) -> FetchResponse: ...


_LEN = struct.Struct(">i")
#: A message entry is at least its magic byte and CRC (magic 0: 5 bytes after the length).
_MIN_ENTRY = 5
#: More segments than any 0.7 partition keeps (1 GiB segments: 10 PiB).
_MAX_SEGMENTS = 10000
_WALK_FETCH = 1024 * 1024
#: Larger messages are not re-read to confirm a misaligned verdict (the lengths decide).
_CONFIRM_MAX = 16 * 1024 * 1024
DEFAULT_MAX_SCAN = 64 * 1024 * 1024


class Alignment(NamedTuple):
    """Verdict of `check_alignment`.

    ``aligned``: True (a message starts at the offset, or it is a segment start / the log
    end), False (it lies inside the message ``[before, after)``), None (undecided: ``detail``
    says why).
    """

    aligned: bool | None
    before: int | None
    after: int | None
    detail: str


def check_alignment(consumer: Broker, topic: str, partition: int, offset: int, *,
                    max_scan: int = DEFAULT_MAX_SCAN) -> Alignment:
    """Walk message lengths from the segment start below ``offset`` (module docstring).

    Raises what the consumer's requests raise (`BrokerError`, `BrokerConnectionError`).
    """
    starts = consumer.offsets(topic, partition, LATEST_TIME, _MAX_SEGMENTS)
    if offset in starts:
        return Alignment(True, offset, offset, "a segment start or the log end")
    if not starts or offset > max(starts):
        return Alignment(None, None, None, "past the end of the log")
    below = [s for s in starts if s < offset]
    if not below:
        return Alignment(None, None, None, "before the start of the log")
    pos = max(below)
    segment = pos
    while pos - segment <= max_scan:
        data = consumer.fetch(topic, partition, pos, _WALK_FETCH).messages
        if len(data) < 4:
            return Alignment(None, None, None, f"the log ends inside a message at {pos}")
        i = 0
        while i + 4 <= len(data):
            (n,) = _LEN.unpack_from(data, i)
            if n < _MIN_ENTRY:
                return Alignment(None, None, None,
                                 f"unreadable message length {n} at {pos + i}")
            start, end = pos + i, pos + i + 4 + n
            if end == offset:
                return Alignment(True, offset, offset, f"the message at {start} ends there")
            if end > offset:
                return _confirm(consumer, topic, partition, start, end)
            i += 4 + n
        pos += i
    return Alignment(None, None, None,
                     f"more than {max_scan} bytes from the segment start {segment}")


def _confirm(consumer: Broker, topic: str, partition: int, start: int,
             end: int) -> Alignment:
    """The offset lies in ``[start, end)`` if that really is one valid message."""
    if end - start <= _CONFIRM_MAX:
        data = consumer.fetch(topic, partition, start, end - start).messages
        try:
            decoded = decode_message_set(data, start, deep=False)
        except DecodeError as exc:
            return Alignment(None, None, None, f"the message at {start} is corrupt ({exc})")
        if decoded.valid_bytes != end - start:
            return Alignment(None, None, None, f"the message at {start} could not be read")
    return Alignment(False, start, end, f"inside the message [{start}, {end})")


def misaligned_error(topic: str, partition: str | int, offset: int, alignment: Alignment,
                     *, group: str | None = None) -> MisalignedOffsetError:
    """The error naming the partition, the offset and how to fix it.

    ``partition`` is ``"B-P"`` for a group member (offsets reset works on those) or the
    broker-local number for a direct fetch.
    """
    where = f"{topic}/{partition}"
    g = group or "GROUP"
    if isinstance(partition, str) and "-" in partition:
        fix = (f"set it to a message boundary with `zkconsumer offsets reset --zk ZK --group {g} "
               f"--topic {topic} --to FILE` where FILE holds the line "
               f"/consumers/{g}/offsets/{topic}/{partition}:{alignment.after} (or "
               f"`--to earliest` / `--to latest` for every partition of {topic}); stop the "
               "group's members first or add --force")
    else:
        fix = (f"fetch from a message boundary: {alignment.before} (the message holding it) "
               f"or {alignment.after} (the next one)")
    return MisalignedOffsetError(
        f"offset {offset} of {where} is misaligned: not a message boundary, it falls "
        f"{alignment.detail}; {fix}", topic=topic, partition=partition, offset=offset,
        before=alignment.before, after=alignment.after)
