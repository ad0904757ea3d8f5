"""``zkconsumer bench fetch``: single-partition `SimpleConsumer` fetch loops against a dev broker.

For each codec (none / gzip / snappy) and payload size (100 B / 1 KiB) a topic is preloaded
with ``--mb`` MB of payload (compressed topics: one wrapper per ``--wrap`` messages, as a
producer batch), then read from offset 0 to the end, repeatedly for about ``--seconds``:

* ``fetch batches`` -- `SimpleConsumer.iter_batches`: per fetch one list of
  ``(offset, next_offset, value)`` tuples, CRC-checked and decompressed (the fast path);
* ``fetch columns`` -- `SimpleConsumer.iter_columns`: per fetch one `MessageBatch` (offsets
  and payloads in columns; no object per message with the compiled decoder);
* ``fetch messages`` -- `SimpleConsumer.iter_messages`: one `FetchedMessage` per message.

Every case runs on both decoder paths (``compiled``: the ``_speedups`` extension when it is
built; ``pure``: the reference), switched in-process.  Each line is
``fetch <kind> <codec> <size> <path>: N msg/s (M MB/s, C CPU s/M msg)`` with MB = 10**6
payload bytes; the rate is messages over the total time of all passes (not a best-of), and
C is the CPU seconds *this process* (the consumer) spent per million messages.  Uncompressed
100 B lines end with the figure Scala 0.7.2's SimpleConsumer reached on this machine, as the
reference (issue 14).  The broker is
a subprocess (``python -m zkconsumer broker``) unless ``--in-process``, so its ``sendfile``
work does not share this process's GIL and is not in C.

``--busy-thread`` runs a pure-Python thread computing beside the fetch loop for the whole
run -- an application's own work in the consumer's process.  The fetch then shares the
interpreter, and what it costs is mostly how often the fetch must take the GIL back after a
socket call (`zkconsumer.client.connection`) -- so it depends on how many calls a response
takes, i.e. on the receive buffer (``--socket-buffer``; 0.7's default is 64 KiB); C then
includes the busy thread's CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from zkconsumer.bench.codec import decoder_path
from zkconsumer.bench.produce import _payloads
from zkconsumer.client import BrokerConnection, SimpleConsumer, multiproduce
from zkconsumer.devcluster.brokers import DevBroker, DevBrokerProcess
from zkconsumer.protocol import Compression, ProduceRequest, accel, encode_message_set

HELP = "SimpleConsumer fetch-loop throughput on one partition (none/gzip/snappy x 100B/1KiB)"

SIZES = {"100B": 100, "1KiB": 1024}

#: Scala 0.7.2's SimpleConsumer on this machine against a real 0.7.2 broker, one partition,
#: uncompressed 100 B messages (issue 14): printed beside our figures as the reference.
SCALA_REFERENCE = {("none", "100B"): "4.6 M msg/s"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mb", type=float, default=32.0,
                        help="MB of payload preloaded per case (default 32)")
    parser.add_argument("--seconds", type=float, default=2.0,
                        help="approximate reading time per case (default 2)")
    parser.add_argument("--fetch-size", type=int, default=1024 * 1024,
                        help="bytes per fetch request (default 1 MiB, the consumer default)")
    parser.add_argument("--wrap", type=int, default=200,
                        help="messages per compressed wrapper (default 200, 0.7's batch.size)")
    parser.add_argument("--codec", action="append", choices=["none", "gzip", "snappy"],
                        help="only this codec (repeatable)")
    parser.add_argument("--size", action="append", choices=list(SIZES),
                        help="only this payload size (repeatable)")
    parser.add_argument("--kind", action="append", choices=["batches", "columns", "messages"],
                        help="only this loop (repeatable)")
    parser.add_argument("--path", action="append", choices=["compiled", "pure"],
                        help="only this decoder path (repeatable; default: both)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the broker in this process (it then shares the GIL)")
    parser.add_argument("--socket-buffer", type=int, default=4 << 20,
                        help="the consumer's receive buffer in bytes (default 4 MiB; 0.7's "
                             "socket.buffersize default, which the group consumer uses, is "
                             "65536)")
    parser.add_argument("--busy-thread", action="store_true",
                        help="run a pure-Python thread computing beside the fetch loop (an "
                             "application's work sharing the GIL)")
    parser.epilog = ("examples:\n  zkconsumer bench fetch --size 100B --codec none --kind columns\n"
                     "  zkconsumer bench fetch --mb 8 --seconds 1 --path compiled\n\n"
                     "exit status: 0 done, 1 error, 2 usage")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def preload(broker: Any, topic: str, codec: Compression, size: int, total_mb: float,
            wrap: int) -> tuple[int, int]:
    """Write about ``total_mb`` MB of payload to ``topic``/0; return (messages, log bytes)."""
    payloads = _payloads(size)
    per_set = wrap if codec != Compression.NONE else max(1, (256 * 1024) // size)
    sets = [encode_message_set(payloads[i:i + per_set], compression=codec)
            for i in range(0, len(payloads) - per_set + 1, per_set)]
    n_sets = max(1, int(total_mb * 1e6 / size / per_set))
    with BrokerConnection(broker.host, broker.port) as conn:
        for i in range(0, n_sets, 16):  # 16 sets per request, confirmed
            group = [ProduceRequest(topic, 0, sets[j % len(sets)])
                     for j in range(i, min(i + 16, n_sets))]
            multiproduce(conn, group, confirm=True)
    return n_sets * per_set, sum(len(sets[j % len(sets)]) for j in range(n_sets))


def run_case(consumer: SimpleConsumer, topic: str, expected: int, kind: str,
             seconds: float) -> tuple[float, float]:
    """(messages per second, CPU seconds per message) over whole passes from 0 to the end."""
    total = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    while True:
        n = 0
        if kind == "batches":
            for _, messages in consumer.iter_batches(topic, 0, 0):
                n += len(messages)
        elif kind == "columns":
            for _, batch in consumer.iter_columns(topic, 0, 0):
                n += len(batch)
        else:
            for _ in consumer.iter_messages(topic, 0, 0):
                n += 1
        if n != expected:
            raise RuntimeError(f"read {n} messages from {topic}, expected {expected}")
        total += n
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return total / elapsed, (time.process_time() - cpu_start) / total


@contextlib.contextmanager
def busy_thread(on: bool) -> Iterator[None]:
    """With ``on``, a thread spinning in Python bytecode (holding the GIL whenever it can)
    until the block ends."""
    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i

    thread = threading.Thread(target=spin, name="bench-busy", daemon=True)
    if on:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        if on:
            thread.join()


def main(args: argparse.Namespace) -> int:
    codecs = args.codec or ["none", "gzip", "snappy"]
    sizes = args.size or list(SIZES)
    kinds = args.kind or ["batches", "columns", "messages"]
    paths = [p for p in (args.path or ["compiled", "pure"])
             if p == "pure" or accel.speedups is not None]
    with tempfile.TemporaryDirectory(prefix="zkc-bench-fetch-") as tmp:
        settings: dict[str, Any] = {
            "num_partitions": 1, "flush_interval": 10000, "flush_interval_ms": 50,
            "flush_scheduler_interval_ms": 50, "socket_send_buffer": 4 << 20,
            "max_request_size": 256 * 1024 * 1024}
        log_dir = Path(tmp) / "broker-0"
        broker: DevBroker | DevBrokerProcess = (
            DevBroker(0, log_dir, **settings) if args.in_process else
            DevBrokerProcess(0, log_dir, log_file=Path(tmp) / "broker.log", **settings))
        broker.start()
        try:
            kind_text = "in-process" if args.in_process else "subprocess"
            print(f"# dev broker ({kind_text}); fetch size {args.fetch_size}, {args.mb} MB per "
                  f"case, compressed wrappers of {args.wrap}, receive buffer "
                  f"{args.socket_buffer}", flush=True)
            print(f"# decoder: {accel.IMPLEMENTATION} by default; {accel.REASON}", flush=True)
            if args.busy_thread:
                print("# a busy pure-Python thread runs beside every fetch loop", flush=True)
            consumer = SimpleConsumer(broker.host, broker.port, fetch_size=args.fetch_size,
                                      max_fetch_size=max(args.fetch_size, 16 << 20),
                                      buffer_size=args.socket_buffer)
            for codec_name in codecs:
                codec = Compression[codec_name.upper()]
                for label in sizes:
                    size = SIZES[label]
                    topic = f"bench-fetch-{codec_name}-{label}"
                    expected, end = preload(broker, topic, codec, size, args.mb, args.wrap)
                    deadline = time.monotonic() + 30  # until the broker's flush shows it all
                    while (consumer.latest_offset(topic, 0) < end
                           and time.monotonic() < deadline):
                        time.sleep(0.01)
                    for kind in kinds:
                        for path in paths:
                            with decoder_path(path), busy_thread(args.busy_thread):
                                rate, cpu = run_case(consumer, topic, expected, kind,
                                                     args.seconds)
                            scala = SCALA_REFERENCE.get((codec_name, label))
                            print(f"fetch {kind} {codec_name} {label} {path}: {rate:.0f} msg/s "
                                  f"({rate * size / 1e6:.1f} MB/s, {cpu * 1e6:.3f} CPU s/M msg)"
                                  + (f"  [Scala 0.7.2 SimpleConsumer: {scala}]" if scala
                                     else ""), flush=True)
            consumer.close()
        finally:
            broker.stop()
    return 0
