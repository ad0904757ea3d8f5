"""A tiny blocking 0.7 client for broker conformance tests, built only from the codec.

It is deliberately *not* ``zkconsumer.client``: the broker must be checked against the wire
format itself.  Requests the codec refuses to encode (illegal topic names, a corrupt frame)
are written by hand with ``struct`` -- each field commented -- so the broker's answer to bytes
a 0.7 client could really send is what is tested.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

from zkconsumer.protocol import (
    FetchRequest,
    FetchResponse,
    MultiFetchRequest,
    MultiFetchResponse,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    Request,
    decode_fetch_response,
    decode_multifetch_response,
    decode_offsets_response,
    encode_message_set,
    encode_request,
)

_INT32 = struct.Struct(">i")


def raw_topic(topic: str | bytes) -> bytes:
    """int16 length + bytes: a topic as the wire carries it, whatever its content."""
    data = topic.encode("utf-8") if isinstance(topic, str) else topic
    return struct.pack(">h", len(data)) + data


def frame(request_type: int, body: bytes) -> bytes:
    """int32 size (of what follows) + int16 request type + body."""
    return struct.pack(">ih", 2 + len(body), request_type) + body


def raw_fetch(topic: str | bytes, partition: int, offset: int, max_size: int) -> bytes:
    return frame(1, raw_topic(topic) + struct.pack(">iqi", partition, offset, max_size))


def raw_offsets(topic: str | bytes, partition: int, time: int, max_offsets: int) -> bytes:
    return frame(4, raw_topic(topic) + struct.pack(">iqi", partition, time, max_offsets))


def raw_produce(topic: str | bytes, partition: int, message_set: bytes) -> bytes:
    return frame(0, raw_topic(topic) + struct.pack(">ii", partition, len(message_set))
                 + message_set)


class Wire:
    """One TCP connection to a broker; requests in, response bodies out."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.timeout = timeout

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- raw
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, req: Request) -> None:
        self.sock.sendall(encode_request(req))

    def recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        (size,) = _INT32.unpack(self.recv_exact(4))
        return self.recv_exact(size)

    def request(self, req: Request | bytes) -> bytes:
        """Send a request (or raw frame bytes) and return the response body."""
        self.sock.sendall(req if isinstance(req, bytes) else encode_request(req))
        return self.read_frame()

    def is_closed(self, timeout: float = 10.0) -> bool:
        """True once the broker has closed the connection (EOF or reset) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(self.timeout)
        if data:
            raise AssertionError(f"unexpected bytes from the broker: {data!r}")
        return True

    # ---------------------------------------------------------------- typed
    def produce(self, topic: str, partition: int, payloads: Sequence[bytes] | bytes,
                **kwargs: object) -> None:
        data = payloads if isinstance(payloads, bytes) else encode_message_set(
            list(payloads), **kwargs)  # type: ignore[arg-type]
        self.send(ProduceRequest(topic, partition, data))

    def multiproduce(self, parts: Sequence[tuple[str, int, bytes]]) -> None:
        self.send(MultiProduceRequest(tuple(ProduceRequest(t, p, m) for t, p, m in parts)))

    def fetch(self, topic: str, partition: int, offset: int,
              max_size: int = 1 << 20) -> FetchResponse:
        return decode_fetch_response(self.request(FetchRequest(topic, partition, offset,
                                                               max_size)))

    def multifetch(self, fetches: Sequence[tuple[str, int, int, int]]) -> MultiFetchResponse:
        req = MultiFetchRequest(tuple(FetchRequest(*f) for f in fetches))
        return decode_multifetch_response(self.request(req))

    def offsets(self, topic: str, partition: int, time: int,
                max_offsets: int = 100) -> tuple[int, ...]:
        resp = decode_offsets_response(self.request(OffsetsRequest(topic, partition, time,
                                                                    max_offsets)))
        assert resp.error == 0
        return resp.offsets

    def end(self, topic: str, partition: int) -> int:
        """The flushed end (latest offset); also a barrier: earlier produces are handled."""
        return self.offsets(topic, partition, -1, 1)[0]
