"""``zkconsumer bench codec``: message-set decode/encode throughput of the protocol codec.

Cases: payloads of 100 B and 1 KiB, uncompressed / gzip / snappy, and three operations:

* ``decode`` -- `decode_message_set` (CRC verified on every message, wrappers expanded, a list
  of ``(offset, next_offset, payload)`` tuples: what consumers use today);
* ``batch`` -- `decode_batch` (the same walk and checks into a `MessageBatch`: int64 columns
  and one payload buffer, no object per message);
* ``encode`` -- `encode_message_set` (as a producer does; pure Python).

Decode and batch run on each decoder path: ``compiled`` (the ``_speedups`` extension, when it
is built) and ``pure`` (the reference), switched in-process.  Each unit of work is one set of
``--messages`` messages -- by default as many as fill one 1 MiB fetch response (the 0.7
consumer's default ``fetch.size``), which is what a consumer decodes at a time.  Compressed
cases wrap ``--batch`` messages per wrapper, like one 0.7 producer request.  Each case runs
for about ``--seconds`` and prints::

    decode none 100B compiled: 17400000 msg/s (1740.0 MB/s, 0.057 CPU s/M msg)

where MB/s counts payload bytes (10**6 bytes per MB) and the last figure is this process's
CPU seconds per million messages.  Lines starting with ``#`` are comments (e.g. why the
compiled path is missing).

Payloads are pseudo-random text with some repetition, so the codecs have realistic work to do.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple

from zkconsumer.errors import LocalProtocolError
from zkconsumer.protocol import (
    Compression,
    accel,
    decode_batch,
    decode_message_set,
    encode_message_set,
    messageset,
)

HELP = "measure message-set decode/encode throughput (none/gzip/snappy x 100B/1KiB)"

SIZES = (100, 1024)
#: The 0.7 consumer's default fetch.size: the natural unit of decoding.
FETCH_SIZE = 1048576


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=1.0,
                        help="approximate run time per case (default: 1.0)")
    parser.add_argument("--messages", type=int, default=None,
                        help="messages per decoded/encoded set (default: as many as fill one "
                             "1 MiB fetch response, the 0.7 consumer's fetch.size)")
    parser.add_argument("--batch", type=int, default=200,
                        help="messages per compressed wrapper (default: 200, the producer's "
                             "batch.size)")
    parser.add_argument("--codec", choices=["none", "gzip", "snappy"], action="append",
                        help="only this codec (repeatable; default: all)")
    parser.add_argument("--size", type=int, action="append",
                        help="only this payload size in bytes (repeatable; default: 100, 1024)")
    parser.add_argument("--only", choices=["decode", "batch", "encode"], action="append",
                        help="only this operation (repeatable; default: all)")
    parser.add_argument("--path", choices=["compiled", "pure"], action="append",
                        help="only this decoder path (repeatable; default: both)")
    parser.epilog = ("examples:\n  zkconsumer bench codec --only decode --size 100 --codec none\n"
                     "  ZKCONSUMER_PURE=1 zkconsumer bench codec --seconds 3\n\n"
                     "exit status: 0 done, 1 error, 2 usage")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def _payloads(n: int, size: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(500)]
    out = []
    for _ in range(n):
        text = b" ".join(rng.choice(words) for _ in range(size // 4))
        out.append((text + b" " * size)[:size])
    return out


class Figure(NamedTuple):
    """One case's result."""

    rate: float          # messages per second of wall time inside the work
    mbps: float          # payload MB (10**6 bytes) per second
    cpu_per_million: float  # CPU seconds of this process per million messages


def _measure(fn: Callable[[], int], seconds: float) -> tuple[float, float]:
    """Run fn (returns messages handled) repeatedly for ~seconds: (msg/s, CPU s per message).

    The rate is total messages over total time spent inside fn (not a best-of), so a noisy,
    shared machine shows in the figure instead of being hidden by one lucky run.
    """
    total = 0
    busy = 0.0
    cpu = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        cpu_start = time.process_time()
        total += fn()
        cpu += time.process_time() - cpu_start
        end = time.perf_counter()
        busy += end - start
        if end >= deadline:
            return (total / busy if busy > 0 else 0.0), (cpu / total if total else 0.0)


def _encode_set(payloads: list[bytes], codec: Compression, batch: int) -> bytes:
    if codec == Compression.NONE:
        return encode_message_set(payloads)
    return b"".join(encode_message_set(payloads[i:i + batch], compression=codec)
                    for i in range(0, len(payloads), batch))


@contextmanager
def decoder_path(path: str) -> Iterator[None]:
    """Run the block on the ``compiled`` or the ``pure`` decoder (LocalProtocolError if the
    compiled one is not built)."""
    if path == "compiled" and accel.speedups is None:
        raise LocalProtocolError(f"compiled decoder unavailable: {accel.REASON}")
    saved = messageset._speedups
    messageset._speedups = accel.speedups if path == "compiled" else None
    try:
        yield
    finally:
        messageset._speedups = saved


def run_case(op: str, codec: Compression, size: int, *, messages: int, batch: int,
             seconds: float, path: str = "pure") -> Figure:
    """One benchmark case on one decoder path."""
    payloads = _payloads(messages, size)
    expected = len(payloads)
    if op in ("decode", "batch"):
        data = _encode_set(payloads, codec, batch)
        decode = decode_message_set if op == "decode" else decode_batch

        def work() -> int:
            decoded = decode(data)
            n = len(decoded.messages) if isinstance(decoded, tuple) else len(decoded)
            if n != expected:  # guards against a broken codec
                raise RuntimeError("decode lost messages")
            return expected
    else:
        def work() -> int:
            _encode_set(payloads, codec, batch)
            return expected

    with decoder_path(path):
        rate, cpu = _measure(work, seconds)
    return Figure(rate, rate * size / 1e6, cpu * 1e6)


def label_of(size: int) -> str:
    return f"{size}B" if size < 1024 or size % 1024 else f"{size // 1024}KiB"


def main(args: argparse.Namespace) -> int:
    codecs = [Compression[name.upper()] for name in (args.codec or ["none", "gzip", "snappy"])]
    sizes = args.size or list(SIZES)
    ops = args.only or ["decode", "batch", "encode"]
    paths = args.path or ["compiled", "pure"]
    print(f"# decoder: {accel.IMPLEMENTATION} by default; {accel.REASON}", flush=True)
    if "compiled" in paths and accel.speedups is None:
        paths = [p for p in paths if p != "compiled"]
    for op in ops:
        # encode has no compiled path (it is the pure-Python encoder either way)
        for path in (paths if op != "encode" else ["pure"]):
            for codec in codecs:
                for size in sizes:
                    messages = args.messages or max(1, FETCH_SIZE // (size + 10))
                    fig = run_case(op, codec, size, messages=messages, batch=args.batch,
                                   seconds=args.seconds, path=path)
                    print(f"{op} {codec.name.lower()} {label_of(size)} {path}: "
                          f"{fig.rate:.0f} msg/s ({fig.mbps:.1f} MB/s, "
                          f"{fig.cpu_per_million:.3f} CPU s/M msg)", flush=True)
    return 0
