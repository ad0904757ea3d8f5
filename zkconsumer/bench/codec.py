"""``zkconsumer bench codec``: message-set decode/encode throughput of the protocol codec.

Cases: payloads of 100 B and 1 KiB, uncompressed / gzip / snappy, decode (CRC verified on every
message, wrappers expanded, as a consumer does) and encode (as a producer does).  Each unit of
work is one set of ``--messages`` messages -- by default as many as fill one 1 MiB fetch
response (the 0.7 consumer's default ``fetch.size``), which is what a consumer decodes at a
time.  Compressed cases wrap ``--batch`` messages per wrapper, like one 0.7 producer request.
Each case runs for about ``--seconds`` and prints ``decode none 100B: 1234567 msg/s
(123.4 MB/s)`` where MB/s counts payload bytes (10**6 bytes per MB).

Payloads are pseudo-random text with some repetition, so the codecs have realistic work to do.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from zkconsumer.protocol import Compression, decode_message_set, encode_message_set

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
    parser.add_argument("--only", choices=["decode", "encode"],
                        help="only decode or only encode")


def _payloads(n: int, size: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(500)]
    out = []
    for _ in range(n):
        text = b" ".join(rng.choice(words) for _ in range(size // 4))
        out.append((text + b" " * size)[:size])
    return out


def _measure(fn: Callable[[], int], seconds: float) -> float:
    """Run fn (returns messages handled) repeatedly for ~seconds; messages per second.

    The rate is total messages over total time spent inside fn (not a best-of), so a noisy,
    shared machine shows in the figure instead of being hidden by one lucky run.
    """
    total = 0
    busy = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        total += fn()
        end = time.perf_counter()
        busy += end - start
        if end >= deadline:
            return total / busy if busy > 0 else 0.0


def _encode_set(payloads: list[bytes], codec: Compression, batch: int) -> bytes:
    if codec == Compression.NONE:
        return encode_message_set(payloads)
    return b"".join(encode_message_set(payloads[i:i + batch], compression=codec)
                    for i in range(0, len(payloads), batch))


def run_case(op: str, codec: Compression, size: int, *, messages: int, batch: int,
             seconds: float) -> tuple[float, float]:
    """One benchmark case: (messages per second, payload MB per second)."""
    payloads = _payloads(messages, size)
    if op == "decode":
        data = _encode_set(payloads, codec, batch)
        expected = len(payloads)

        def work() -> int:
            decoded = decode_message_set(data)
            if len(decoded.messages) != expected:  # guards against a broken codec
                raise RuntimeError("decode lost messages")
            return expected
    else:
        def work() -> int:
            _encode_set(payloads, codec, batch)
            return len(payloads)

    rate = _measure(work, seconds)
    return rate, rate * size / 1e6


def main(args: argparse.Namespace) -> int:
    codecs = [Compression[name.upper()] for name in (args.codec or ["none", "gzip", "snappy"])]
    sizes = args.size or list(SIZES)
    ops = [args.only] if args.only else ["decode", "encode"]
    for op in ops:
        for codec in codecs:
            for size in sizes:
                messages = args.messages or max(1, FETCH_SIZE // (size + 10))
                rate, mbps = run_case(op, codec, size, messages=messages,
                                      batch=args.batch, seconds=args.seconds)
                label = f"{size}B" if size < 1024 or size % 1024 else f"{size // 1024}KiB"
                print(f"{op} {codec.name.lower()} {label}: {rate:.0f} msg/s ({mbps:.1f} MB/s)",
                      flush=True)
    return 0
