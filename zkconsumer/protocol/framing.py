"""Sans-I/O reassembly of int32-size-prefixed frames from a byte stream.

Both directions of the 0.7 protocol are framed the same way (``int32 size`` + that many
bytes): the broker uses `FrameReader` for requests, the client for responses.  The caller owns
the socket: it `feed`s whatever it received and pulls complete frames with `next_frame`;
`need` says how many more bytes complete the next frame, so a client can ``recv_into`` a
right-sized buffer instead of looping on small reads.

**A body is allocated once, at its full size**, as soon as its size prefix is in, and filled
in place: by `feed`, or by the caller receiving straight into `room` (then `received`).  Why:
growing one buffer by appends re-copies it at every reallocation (a bytearray grows by about
an eighth), and copying a frame out of it twice more made a 5 MB produce cost the dev broker
about 4 µs of CPU per 1 KiB message against 0.75 µs for 1.3 MB frames (measured ad hoc;
`zkconsumer bench broker --batch 5000` in docs/performance.md, "Large produce requests").
Now it is copied once by the kernel (`room`) or once by `feed`, and `next_frame` hands the
body over without a copy.

Invariants
    * `next_frame` returns the body (size prefix stripped) of complete frames only, in order,
      and never buffers more than one frame past what was fed.
    * A negative size or one above ``max_frame`` raises `InvalidMessageSizeError` (the broker's
      InvalidRequestException) from `next_frame`, `room` or `need` -- never from `feed`; the
      reader is then unusable -- the stream has lost framing.
"""

from __future__ import annotations

import struct

from zkconsumer.errors import ConfigurationError, InvalidMessageSizeError
from zkconsumer.protocol.constants import DEFAULT_MAX_FRAME

__all__ = ["FrameReader"]

_INT32 = struct.Struct(">i")


class FrameReader:
    """Feed bytes in, take whole frames out (see module docstring)."""

    __slots__ = ("_body", "_buf", "_filled", "_max_frame")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if max_frame < 0:
            raise ConfigurationError(f"max_frame must be >= 0, got {max_frame}")
        self._buf = bytearray()  # fed bytes no body holds: a size prefix and what follows it
        self._body: bytearray | None = None  # the current frame's body, at its full size
        self._filled = 0  # bytes of ``_body`` received so far
        self._max_frame = max_frame

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append received bytes (into the current body while it has room)."""
        body = self._body
        if body is not None and self._filled < len(body):
            take = min(len(data), len(body) - self._filled)
            with memoryview(data) as view:
                body[self._filled:self._filled + take] = view[:take]
                self._filled += take
                if take < len(data):
                    self._buf += view[take:]
            return
        self._buf += data

    def _current(self) -> bytearray | None:
        """The current frame's body, allocated (and given the bytes fed for it) once its size
        prefix is in; None before that."""
        if self._body is None and len(self._buf) >= 4:
            (size,) = _INT32.unpack_from(self._buf, 0)
            if size < 0 or size > self._max_frame:
                raise InvalidMessageSizeError(
                    f"frame size {size} outside 0..{self._max_frame}")
            body = bytearray(size)
            have = min(size, len(self._buf) - 4)
            with memoryview(self._buf) as view:
                body[:have] = view[4:4 + have]
            del self._buf[:4 + have]  # deleting a prefix of a bytearray is amortised O(1)
            self._body, self._filled = body, have
        return self._body

    def next_frame(self) -> bytearray | None:
        """The next complete frame body (the reader lets go of it: no copy), or None until
        enough bytes were fed."""
        body = self._current()
        if body is None or self._filled < len(body):
            return None
        self._body, self._filled = None, 0
        return body

    def room(self) -> memoryview | None:
        """Where the current frame's missing bytes go: receive into it and call `received`
        (one copy, the kernel's); None while no body is started or it is complete."""
        body = self._current()
        if body is None or self._filled == len(body):
            return None
        return memoryview(body)[self._filled:]

    def received(self, n: int) -> None:
        """``n`` bytes were received into the last `room`."""
        body = self._body
        if body is None or not 0 <= n <= len(body) - self._filled:
            raise ValueError(f"received {n} bytes into a room that has no space for them")
        self._filled += n

    def need(self) -> int:
        """Bytes still missing for the next frame (0: `next_frame` will return or raise)."""
        try:
            body = self._current()
        except InvalidMessageSizeError:
            return 0
        if body is None:
            return 4 - len(self._buf)
        return len(body) - self._filled

    @property
    def buffered(self) -> int:
        """Bytes fed but not yet returned as frames (a size prefix read into a body no
        longer counts)."""
        return len(self._buf) + (self._filled if self._body is not None else 0)
