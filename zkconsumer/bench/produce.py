"""``zkconsumer bench produce``: end-to-end `Producer` throughput against real dev brokers.

Each case sends ``--mb`` MB of payloads (100 B or 1 KiB each) through a `Producer` in
``broker.list`` mode to ``--brokers`` dev brokers (subprocesses unless ``--in-process``) and is
timed from the first ``send()`` until the brokers have **appended** everything (their flushed
ends, read with offsets requests, add up to the bytes the producer wrote; the brokers flush,
without fsync, after every append, so that end is the appended end) -- not merely until
``send()`` returned.  Payloads go ``--send-batch`` per ``send()`` call (one 0.7
``ProducerData``), the application-side batching the producer's API is built for; a ``x1`` case
shows the cost of one ``send()`` per message.

Cases (``produce <mode> <codec> <size>: N msg/s (M MB/s)``, MB = 10**6 payload bytes):

* ``async`` none / gzip / snappy -- background batching, ``batch.size`` = ``--batch-size``;
* ``async-confirm`` none -- the same with confirmed produce (one round trip per batch);
* ``sync`` none and ``sync-confirm`` none -- ``send()`` delivers before returning;
* ``async x1``, ``sync x1``, ``sync-confirm x1`` none 100B -- one message per ``send()`` (the
  sync ones pay one request, and with confirm one round trip, per message);
* ``async x1 b200`` and ``sync x200`` none 100B -- the settings of Scala's 0.7.2
  ProducerPerformance (1 partition, ``batch.size`` 200, ``queue.size`` 10000, a blocking
  queue): one message per ``send()`` in async mode, 200 per ``send()`` in sync mode.  They
  print the figures Scala's tool reached on this machine against real 0.7.2 brokers (issue 14)
  beside ours, and always send the full ``--mb`` (a short run would mostly time start-up).

On a machine where the brokers cannot ingest as fast as the producer sends, the figure is the
brokers' (the producer blocks on TCP back-pressure); ``--verbose`` also prints when the last
``send()`` returned and when ``close()`` had handed everything to the sockets.  ``--sink``
isolates the producer's own cost: the "broker" is a process (a thread with ``--in-process``)
that reads and discards (so confirmed modes are not available), and a case ends when
``close()`` returns.  ``--verbose``
also prints the CPU time this process (the producer; with ``--in-process`` the brokers or
sink too) spent per million messages, a figure less swayed by the machine's load than the rate.
"""

from __future__ import annotations

import argparse
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from zkconsumer.client import SimpleConsumer
from zkconsumer.devcluster.brokers import DevBroker, DevBrokerProcess
from zkconsumer.producer import Producer
from zkconsumer.protocol import Compression

HELP = "end-to-end Producer throughput against dev brokers (async/sync, none/gzip/snappy)"

SIZES = {"100B": 100, "1KiB": 1024}
#: (mode, codec, size label, messages per send, batch.size); the default case list.  None
#: means the ``--send-batch`` / ``--batch-size`` option.
CASES: tuple[tuple[str, str, str, int | None, int | None], ...] = (
    ("async", "none", "100B", None, None), ("async", "none", "1KiB", None, None),
    ("async", "gzip", "100B", None, None), ("async", "gzip", "1KiB", None, None),
    ("async", "snappy", "100B", None, None), ("async", "snappy", "1KiB", None, None),
    ("async-confirm", "none", "100B", None, None), ("async-confirm", "none", "1KiB", None, None),
    ("sync", "none", "100B", None, None), ("sync", "none", "1KiB", None, None),
    ("sync-confirm", "none", "100B", None, None), ("sync-confirm", "none", "1KiB", None, None),
    ("async", "none", "100B", 1, None), ("sync", "none", "100B", 1, None),
    ("sync-confirm", "none", "100B", 1, None),
    ("async", "none", "100B", 1, 200), ("sync", "none", "100B", 200, 200),
)

#: Scala 0.7.2 ProducerPerformance on this machine, same broker settings (issue 14).
SCALA_REFERENCE = {("async", 1): "1.1-1.4 M msg/s", ("sync", 200): "1.4-1.6 M msg/s"}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mb", type=float, default=50.0,
                        help="MB of payload per case (default 50; the async x1 case uses "
                             "1/10, sync x1 cases 1/200; the reference cases the full amount)")
    parser.add_argument("--send-batch", type=int, default=1000,
                        help="messages per send() call (default 1000)")
    parser.add_argument("--batch-size", type=int, default=5000,
                        help="producer batch.size in messages (default 5000)")
    parser.add_argument("--brokers", type=int, default=1,
                        help="dev brokers to spread over (default 1)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the brokers in this process (they then share its GIL)")
    parser.add_argument("--mode", action="append",
                        choices=["async", "async-confirm", "sync", "sync-confirm"],
                        help="only this mode (repeatable)")
    parser.add_argument("--codec", action="append", choices=["none", "gzip", "snappy"],
                        help="only this codec (repeatable)")
    parser.add_argument("--size", action="append", choices=list(SIZES),
                        help="only this payload size (repeatable)")
    parser.add_argument("--reference", action="store_true",
                        help="only the two cases with Scala ProducerPerformance's settings "
                             "(async x1 b200, sync x200)")
    parser.add_argument("--sink", action="store_true",
                        help="send to a discarding TCP sink instead of dev brokers (measures "
                             "the producer alone; unconfirmed modes only)")
    parser.add_argument("--verbose", action="store_true",
                        help="also print producer-side timings per case")


def _payloads(size: int, n: int = 4096, seed: int = 11) -> list[bytes]:
    """Text-like payloads with repetition, so the codecs have realistic work."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(500)]
    return [(b" ".join(rng.choice(words) for _ in range(size // 4)) + b" " * size)[:size]
            for _ in range(n)]


#: The ``--sink`` process: accept connections on a free port (printed first), discard input;
#: exit when stdin ends, i.e. when the bench closes it or dies (no orphan left behind).
_SINK_SCRIPT = """
import socket, sys, threading
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def drain(conn):
    buf = bytearray(1 << 20)
    with conn:
        while conn.recv_into(buf):
            pass
def accept():
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=drain, args=(conn,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
sys.stdin.read()
"""


class Sink:
    """A TCP "broker" that reads and discards everything (for ``--sink``).

    A subprocess, so the producer's process runs nothing else (its CPU figure is the
    producer's alone); with ``in_process`` a thread of this process, which then shares the GIL.
    """

    def __init__(self, broker_id: int, *, in_process: bool = False) -> None:
        self.broker_id = broker_id
        self.host = "127.0.0.1"
        self._proc: subprocess.Popen[str] | None = None
        self._listener: socket.socket | None = None
        if in_process:
            self._listener = socket.create_server((self.host, 0))
            self.port = int(self._listener.getsockname()[1])
            threading.Thread(target=self._accept, daemon=True).start()
            return
        self._proc = subprocess.Popen([sys.executable, "-c", _SINK_SCRIPT],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError("the sink process did not start")
        self.port = int(line)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drain, args=(conn,), daemon=True).start()

    @staticmethod
    def _drain(conn: socket.socket) -> None:
        buf = bytearray(1 << 20)
        with conn:
            while conn.recv_into(buf):
                pass

    def start(self) -> Sink:
        return self

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._proc is not None:
            for pipe in (self._proc.stdin, self._proc.stdout):
                if pipe is not None:
                    pipe.close()  # closing stdin ends the sink
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


def _appended(brokers: list[Any], topic: str) -> int:
    total = 0
    for b in brokers:
        with SimpleConsumer(b.host, b.port, socket_timeout=30.0) as consumer:
            total += consumer.latest_offset(topic, 0)
    return total


def run_case(brokers: list[Any], mode: str, codec: str, size: int, *, total_mb: float,
             send_batch: int, batch_size: int, topic: str,
             queue_size: int | None = None) -> dict[str, float]:
    payloads = _payloads(size)
    n_total = max(send_batch, int(total_mb * 1e6 / size))
    chunks = [payloads[i:i + send_batch] for i in range(0, len(payloads), send_batch)]
    chunks = [c for c in chunks if len(c) == send_batch] or [payloads[:send_batch]]
    broker_list = ",".join(f"{b.broker_id}:{b.host}:{b.port}" for b in brokers)
    producer = Producer(broker_list=broker_list, producer_type=mode.split("-")[0],
                        confirm=mode.endswith("confirm"), compression_codec=Compression[
                            codec.upper()], batch_size=batch_size,
                        queue_size=queue_size or 4 * batch_size + send_batch,
                        enqueue_timeout_ms=-1, partitioner="round-robin",
                        queue_time_ms=100)
    sent = 0
    cpu_start = time.process_time()
    start = time.perf_counter()
    i = 0
    if send_batch == 1:  # one message per send(topic, payload), as applications call it
        send = producer.send
        sent = n_total
        for j in range(n_total):
            send(topic, payloads[j & 4095])
    while sent < n_total:
        chunk = chunks[i % len(chunks)]
        producer.send(topic, chunk)
        sent += len(chunk)
        i += 1
    sends_done = time.perf_counter()
    producer.close()
    closed = time.perf_counter()
    cpu = time.process_time() - cpu_start
    expected = producer.stats.set_bytes
    if producer.stats.failed or producer.stats.messages_sent != sent:
        raise RuntimeError(f"benchmark lost messages: {producer.stats.snapshot()}")
    while not isinstance(brokers[0], Sink) and _appended(brokers, topic) < expected:
        time.sleep(0.005)
    end = time.perf_counter()
    elapsed = end - start
    return {"messages": sent, "rate": sent / elapsed, "mbps": sent * size / elapsed / 1e6,
            "send_rate": sent / (sends_done - start), "close_rate": sent / (closed - start),
            "requests": producer.stats.requests, "ratio": producer.stats.bytes_sent / expected,
            "cpu_per_m": cpu / sent * 1e6}


def main(args: argparse.Namespace) -> int:
    cases = [c for c in CASES
             if (not args.mode or c[0] in args.mode) and (not args.codec or c[1] in args.codec)
             and (not args.size or c[2] in args.size)
             and not (args.sink and "confirm" in c[0]) and (c[4] or not args.reference)]
    with tempfile.TemporaryDirectory(prefix="zkc-bench-produce-") as tmp:
        settings: dict[str, Any] = {
            # log.flush.interval 1: without fsync a flush only publishes the appended end,
            # so the end of a case is seen when the broker appended the last set, not up to
            # 100 ms later when the flush timer runs.
            "num_partitions": 1, "flush_interval": 1, "flush_interval_ms": 50,
            "flush_scheduler_interval_ms": 50, "socket_receive_buffer": 4 << 20,
            "max_request_size": 256 * 1024 * 1024}
        brokers: list[Any] = []
        try:
            for i in range(max(1, args.brokers)):
                log_dir = Path(tmp) / f"broker-{i}"
                broker: DevBroker | DevBrokerProcess | Sink
                if args.sink:
                    broker = Sink(i, in_process=args.in_process)
                elif args.in_process:
                    broker = DevBroker(i, log_dir, **settings)
                else:
                    broker = DevBrokerProcess(i, log_dir, log_file=Path(tmp) / f"broker-{i}.log",
                                              **settings)
                brokers.append(broker.start())
            kind = "sink" if args.sink else "in-process" if args.in_process else "subprocess"
            print(f"# {len(brokers)} dev broker(s) ({kind}); {args.send_batch} messages per "
                  f"send(), batch.size {args.batch_size} (x1, x200 and b200 cases: their own)",
                  flush=True)
            for n, (mode, codec, label, per_send, batch) in enumerate(cases):
                send_batch = per_send or args.send_batch
                mb = args.mb if per_send != 1 or batch else args.mb / (
                    10 if mode == "async" else 200)  # sync x1: one request per message
                r = run_case(brokers, mode, codec, SIZES[label], total_mb=mb,
                             send_batch=send_batch, batch_size=batch or args.batch_size,
                             topic=f"bench-produce-{n}", queue_size=10000 if batch else None)
                name = mode if per_send is None else f"{mode} x{per_send}"
                if batch:
                    name += f" b{batch}" if per_send == 1 else ""
                if args.sink:
                    name += " (sink)"
                scala = SCALA_REFERENCE.get((mode, per_send or 0)) if batch else None
                print(f"produce {name} {codec} {label}: {r['rate']:.0f} msg/s "
                      f"({r['mbps']:.1f} MB/s)"
                      + (f"  [Scala 0.7.2 ProducerPerformance: {scala}]" if scala else ""),
                      flush=True)
                if args.verbose:
                    print(f"#   {r['messages']:.0f} messages, {r['requests']:.0f} requests; "
                          f"send() returned at {r['send_rate']:.0f} msg/s, close() at "
                          f"{r['close_rate']:.0f} msg/s; payload/wire {r['ratio']:.2f}; "
                          f"this process used {r['cpu_per_m']:.2f} CPU s per M messages",
                          flush=True)
        finally:
            for b in brokers:
                b.stop()
    return 0
