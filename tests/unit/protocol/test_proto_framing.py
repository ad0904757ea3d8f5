"""FrameReader: whole, byte-at-a-time and multi-frame feeding; size limits."""

from __future__ import annotations

import struct

import pytest

from zkconsumer.errors import ConfigurationError, InvalidMessageSizeError
from zkconsumer.protocol import (
    FetchRequest,
    FrameReader,
    OffsetsRequest,
    decode_request,
    encode_fetch_response,
    encode_request,
)

FRAMES = [
    encode_request(FetchRequest("topic", 0, 12345, 1024)),
    encode_fetch_response(0, b""),
    encode_request(OffsetsRequest("t", 1, -2, 1)),
    struct.pack(">i", 0),  # a zero-length frame is legal framing
]
STREAM = b"".join(FRAMES)
BODIES = [f[4:] for f in FRAMES]


def drain(reader: FrameReader) -> list[bytes]:
    out = []
    while (frame := reader.next_frame()) is not None:
        out.append(frame)
    return out


def test_whole_stream() -> None:
    reader = FrameReader()
    reader.feed(STREAM)
    assert drain(reader) == BODIES
    assert reader.buffered == 0
    assert reader.need() == 4


def test_byte_at_a_time() -> None:
    reader = FrameReader()
    got: list[bytes] = []
    for i in range(len(STREAM)):
        reader.feed(STREAM[i:i + 1])
        got.extend(drain(reader))
    assert got == BODIES
    assert decode_request(got[0]) == FetchRequest("topic", 0, 12345, 1024)


def test_need_is_exact() -> None:
    reader = FrameReader()
    frame = FRAMES[0]
    assert reader.need() == 4
    reader.feed(frame[:2])
    assert reader.need() == 2
    reader.feed(frame[2:6])
    assert reader.need() == len(frame) - 6
    assert reader.next_frame() is None
    reader.feed(frame[6:] + FRAMES[1][:1])
    assert reader.need() == 0
    assert reader.next_frame() == BODIES[0]
    assert reader.need() == 3


def test_random_chunking() -> None:
    import random

    rng = random.Random(3)
    for _ in range(50):
        reader = FrameReader()
        got: list[bytes] = []
        pos = 0
        while pos < len(STREAM):
            step = rng.randint(1, 20)
            reader.feed(memoryview(STREAM)[pos:pos + step])
            pos += step
            got.extend(drain(reader))
        assert got == BODIES


@pytest.mark.parametrize("size", [-1, -(2**31), 101])
def test_bad_frame_sizes(size: int) -> None:
    reader = FrameReader(max_frame=100)
    reader.feed(struct.pack(">i", size))
    assert reader.need() == 0  # "call next_frame": it will raise
    with pytest.raises(InvalidMessageSizeError):
        reader.next_frame()


def test_max_frame_boundary() -> None:
    reader = FrameReader(max_frame=3)
    reader.feed(struct.pack(">i", 3) + b"abc")
    assert reader.next_frame() == b"abc"
    with pytest.raises(ConfigurationError):
        FrameReader(max_frame=-1)


def test_a_body_is_received_in_place() -> None:
    """`room` is the current body's missing part: bytes received into it (`received`) make
    the frame without passing through `feed`, and what follows is fed as usual."""
    body = bytes(range(256)) * 40
    reader = FrameReader()
    assert reader.room() is None  # no size prefix yet
    reader.feed(struct.pack(">i", len(body)) + body[:100])
    room = reader.room()
    assert room is not None and len(room) == len(body) - 100
    room[:1000] = body[100:1100]
    reader.received(1000)
    assert reader.next_frame() is None
    assert reader.need() == len(body) - 1100
    room = reader.room()
    assert room is not None
    room[:] = body[1100:]
    reader.received(len(room))
    assert reader.room() is None  # complete: nothing more goes into this body
    reader.feed(FRAMES[0])
    assert drain(reader) == [body, BODIES[0]]
    with pytest.raises(ValueError):
        reader.received(1)  # no body started: nothing can have been received into it


def test_bad_size_raises_from_room_not_feed() -> None:
    reader = FrameReader(max_frame=10)
    reader.feed(struct.pack(">i", 11) + b"x")  # feeding never raises
    with pytest.raises(InvalidMessageSizeError):
        reader.room()
