"""``zkconsumer bench broker``: produce and fetch throughput of the dev broker over loopback.

Cases (one output line each, ``<case>: <msg/s> msg/s (<MB/s> MB/s)``):

* ``produce <size>`` -- sets of ``--batch`` messages per produce request, one connection,
  timed until an offsets request shows everything flushed (the broker validates every CRC).
* ``fetch <size> max <n>`` -- a loop of fetch requests walking the partition from offset 0
  with a large ``max_size``, reading the raw response bytes (no decoding): what the broker's
  ``sendfile`` path delivers.
* ``multifetch <size> max <n>`` -- the same with one multifetch over ``--partitions``
  partitions per round trip.

The broker is a subprocess (``python -m zkconsumer broker``) unless ``--in-process``; the
client is built from the codec and a plain socket, so the figure is the broker's, not a
client library's.  MB = 10**6 bytes.
"""

from __future__ import annotations

import argparse
import socket
import struct
import tempfile
import time
from pathlib import Path

from zkconsumer.devcluster.brokers import DevBroker, DevBrokerProcess
from zkconsumer.protocol import (
    FetchRequest,
    MultiFetchRequest,
    OffsetsRequest,
    ProduceRequest,
    decode_offsets_response,
    encode_message_set,
    encode_request,
)

HELP = "dev broker throughput: produce and fetch (sendfile) over loopback"

_INT32 = struct.Struct(">i")
_SIZES = {"100B": 100, "1KiB": 1024}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--produce-mb", type=float, default=40.0,
                        help="MB to produce per message size (default 40)")
    parser.add_argument("--fetch-mb", type=float, default=256.0,
                        help="MB of log to fetch per case (default 256)")
    parser.add_argument("--batch", type=int, default=200,
                        help="messages per produce request (default 200, 0.7's batch.size)")
    parser.add_argument("--max-size", type=int, default=4 * 1024 * 1024,
                        help="fetch max_size in bytes (default 4 MiB)")
    parser.add_argument("--partitions", type=int, default=4,
                        help="partitions per multifetch (default 4)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="passes over the log per fetch case; the best is shown")
    parser.add_argument("--in-process", action="store_true",
                        help="run the broker in this process instead of a subprocess")
    parser.add_argument("--send-buffer", type=int, default=4 * 1024 * 1024,
                        help="broker socket.send.buffer (default 4 MiB; 0.7's default is "
                             "102400)")
    parser.add_argument("--dir", help="log directory (default: a temporary directory)")


class _Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        self.buf = bytearray(64 * 1024 * 1024)
        self.view = memoryview(self.buf)

    def recv_frame(self) -> int:
        """Read one response frame into the buffer; return its body length."""
        header = self.view[:4]
        self._fill(header)
        size: int = _INT32.unpack(header)[0]
        self._fill(self.view[:size])
        return size

    def _fill(self, view: memoryview) -> None:
        got, n = 0, len(view)
        while got < n:
            k = self.sock.recv_into(view[got:], n - got)
            if not k:
                raise ConnectionError("broker closed the connection")
            got += k

    def end(self, topic: str, partition: int) -> int:
        self.sock.sendall(encode_request(OffsetsRequest(topic, partition, -1, 1)))
        size = self.recv_frame()
        return int(decode_offsets_response(bytes(self.view[:size])).offsets[0])

    def close(self) -> None:
        self.sock.close()


def _line(case: str, messages: float, nbytes: float, seconds: float) -> str:
    return (f"{case}: {messages / seconds:.0f} msg/s "
            f"({nbytes / seconds / 1e6:.1f} MB/s)")


def _produce(conn: _Conn, topic: str, size: int, total_bytes: float,
             batch: int) -> tuple[int, int, float]:
    """Send sets of ``batch`` messages back to back; time until all are flushed."""
    one_set = encode_message_set([bytes([97 + i % 26]) * size for i in range(batch)])
    frame = encode_request(ProduceRequest(topic, 0, one_set))
    n_requests = max(1, int(total_bytes // (batch * size)))
    start = time.perf_counter()
    for _ in range(n_requests):
        conn.sock.sendall(frame)
    while conn.end(topic, 0) < n_requests * len(one_set):
        time.sleep(0.001)
    return n_requests * batch, n_requests * batch * size, time.perf_counter() - start


def _fetch_pass(conn: _Conn, topic: str, ends: dict[int, int], max_size: int,
                multi: bool) -> float:
    """Walk every partition from 0 to its end; return the seconds it took."""
    offsets = dict.fromkeys(ends, 0)
    start = time.perf_counter()
    if multi:
        while any(offsets[p] < ends[p] for p in ends):
            live = [p for p in ends if offsets[p] < ends[p]]
            req = MultiFetchRequest(tuple(FetchRequest(topic, p, offsets[p], max_size)
                                          for p in live))
            conn.sock.sendall(encode_request(req))
            conn.recv_frame()
            pos = 2  # body: int16 error, then per part: int32 size(=2+n), int16 error, n bytes
            for p in live:
                (size,) = _INT32.unpack_from(conn.buf, pos)
                offsets[p] += size - 2
                pos += 4 + size
    else:
        for p in ends:
            while offsets[p] < ends[p]:
                conn.sock.sendall(encode_request(FetchRequest(topic, p, offsets[p], max_size)))
                offsets[p] += conn.recv_frame() - 2
    return time.perf_counter() - start


def run(port: int, args: argparse.Namespace) -> list[str]:
    lines = []
    conn = _Conn(port)
    try:
        parts = max(1, args.partitions)
        for label, size in _SIZES.items():
            msgs, nbytes, secs = _produce(conn, f"p{label}", size, args.produce_mb * 1e6,
                                          args.batch)
            lines.append(_line(f"produce {label}", msgs, nbytes, secs))
            print(lines[-1], flush=True)
        for label, size in _SIZES.items():
            topic = f"f{label}"
            per_part = args.fetch_mb * 1e6 / parts
            batch = max(1, (1024 * 1024) // size)
            for p in range(parts):
                payloads = [b"x" * size] * batch
                data = encode_request(ProduceRequest(topic, p, encode_message_set(payloads)))
                for _ in range(max(1, int(per_part // (batch * size)))):
                    conn.sock.sendall(data)
            ends = {p: conn.end(topic, p) for p in range(parts)}
            total = sum(ends.values())
            n_msgs = total / (size + 10)
            for multi in (False, True):
                best = min(_fetch_pass(conn, topic, ends, args.max_size, multi)
                           for _ in range(max(1, args.rounds)))
                kind = "multifetch" if multi else "fetch"
                lines.append(_line(f"{kind} {label} max {args.max_size // 1024}KiB",
                                   n_msgs, total, best))
                print(lines[-1], flush=True)
    finally:
        conn.close()
    return lines


def main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="zkc-bench-broker-") as tmp:
        log_dir = Path(args.dir) if args.dir else Path(tmp) / "logs"
        settings = {"num_partitions": max(1, args.partitions), "flush_interval": 500,
                    "flush_interval_ms": 50, "flush_scheduler_interval_ms": 50,
                    "max_request_size": 256 * 1024 * 1024, "socket_send_buffer": args.send_buffer,
                    "socket_receive_buffer": 4 << 20}
        broker: DevBroker | DevBrokerProcess
        if args.in_process:
            broker = DevBroker(0, log_dir, **settings)
        else:
            broker = DevBrokerProcess(0, log_dir, log_file=Path(tmp) / "broker.log",
                                      **settings)
        broker.start()
        try:
            mode = "in-process" if args.in_process else "subprocess"
            print(f"# dev broker ({mode}) on 127.0.0.1:{broker.port}, batch {args.batch}, "
                  f"fetch max_size {args.max_size}", flush=True)
            run(broker.port, args)
        finally:
            broker.stop()
    return 0
