"""Sans-I/O reassembly of int32-size-prefixed frames from a byte stream.

Both directions of the 0.7 protocol are framed the same way (``int32 size`` + that many
bytes): the broker uses `FrameReader` for requests, the client for responses.  The caller owns
the socket: it `feed`s whatever it received and pulls complete frames with `next_frame`;
`need` says how many more bytes complete the next frame, so a client can ``recv_into`` a
right-sized buffer instead of looping on small reads.

Invariants
    * `next_frame` returns the body (size prefix stripped) of complete frames only, in order,
      and never buffers more than one frame past what was fed.
    * A negative size or one above ``max_frame`` raises `InvalidMessageSizeError` (the broker's
      InvalidRequestException); the reader is then unusable -- the stream has lost framing.
"""

from __future__ import annotations

import struct

from zkconsumer.errors import ConfigurationError, InvalidMessageSizeError
from zkconsumer.protocol.constants import DEFAULT_MAX_FRAME

__all__ = ["FrameReader"]

_INT32 = struct.Struct(">i")


class FrameReader:
    """Feed bytes in, take whole frames out (see module docstring)."""

    __slots__ = ("_buf", "_max_frame", "_size")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 0:
            raise ConfigurationError(f"max_frame must be >= 0, got {max_frame}")
        self._buf = bytearray()
        self._max_frame = max_frame
        self._size = -1  # size of the frame being assembled, -1 until its prefix is read

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes."""
        self._buf += data

    def _frame_size(self) -> int:
        """The current frame's size, or -1 when its prefix has not fully arrived."""
        if self._size < 0 and len(self._buf) >= 4:
            (size,) = _INT32.unpack_from(self._buf, 0)
            if size < 0 or size > self._max_frame:
                raise InvalidMessageSizeError(
                    f"frame size {size} outside 0..{self._max_frame}")
            self._size = size
        return self._size

    def next_frame(self) -> bytes | None:
        """The next complete frame body, or None until enough bytes were fed."""
        size = self._frame_size()
        if size < 0 or len(self._buf) < 4 + size:
            return None
        frame = bytes(self._buf[4:4 + size])
        del self._buf[:4 + size]  # deleting a prefix of a bytearray is amortised O(1)
        self._size = -1
        return frame

    def need(self) -> int:
        """Bytes still missing for the next frame (0: `next_frame` will return or raise)."""
        have = len(self._buf)
        if have < 4:
            return 4 - have
        try:
            size = self._frame_size()
        except InvalidMessageSizeError:
            return 0
        return max(0, 4 + size - have)

    @property
    def buffered(self) -> int:
        """Bytes fed but not yet returned as frames."""
        return len(self._buf)
