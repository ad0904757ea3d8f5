"""``zkconsumer bench daemon``: end-to-end throughput of ``zkconsumer run``.

A local dev cluster (ZooKeeper + one dev broker with 4 partitions, flushing every 50 ms) is
started; for each payload size (100 B / 1 KiB) and codec (none / gzip / snappy) one topic of
``--messages`` messages is produced ONCE with a `Producer` (``compression.codec`` = the codec;
compressed topics get one wrapper per ``batch.size`` messages, the Producer's default of 200),
and each case reads it from the start with a fresh group: a ``zkconsumer run`` subprocess is
started and timed from its spawn until every message reached the sink:

* ``file lines``  -- ``--output FILE --format lines``; done when the file has every byte;
* ``exec jsonl``  -- ``--exec CHILD --format jsonl``; CHILD reads stdin in chunks and
  acknowledges each chunk with one ``ack N`` line, and reports when it has seen all lines.

Every case runs on each decoder path: ``compiled`` (the ``_speedups`` extension; left out
when it is not built) and ``pure`` (the subprocess runs with ``ZKCONSUMER_PURE=1``).  The
bench checks that the process really ran that path (the extension is mapped in its memory
exactly on the compiled path).  Printed per case::

    file lines 100B none compiled: 1368791 msg/s (136.9 MB/s, 0.731 CPU s/M msg) [steady 3773207 msg/s after 0.23s start-up]

-- the start-to-done rate, which includes interpreter start-up and joining the group; MB/s
counts payload bytes (10**6 per MB); the CPU figure is the ``zkconsumer run`` process's own
CPU seconds (user + system, start-up included, the exec child not included, read from
``/proc/PID/stat`` when the case is done) per million messages; then the steady rate measured
from the first message written.  Lines starting with ``#`` are comments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import NamedTuple

import zkconsumer
from zkconsumer.client.simple import SimpleConsumer
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.errors import ZkConsumerError
from zkconsumer.producer import Producer
from zkconsumer.protocol import Compression, accel

HELP = ("measure zkconsumer run end to end: --output file and --exec jsonl, 100B and 1KiB, "
        "none/gzip/snappy, compiled and pure decoder")

SIZES = (100, 1024)
SINKS = ("file", "exec")
CODECS = ("none", "gzip", "snappy")
PATHS = ("compiled", "pure")
PARTITIONS = 4
#: How often a case looks whether the sink has everything (seconds).
_POLL = 0.005

_CHILD = """
import os, sys, time
total, done_path = int(sys.argv[1]), sys.argv[2]
seen, first, pending = 0, None, b""
while seen < total:
    chunk = os.read(0, 1 << 20)
    if not chunk:
        break
    if first is None:
        first = time.time()
    n = chunk.count(b"\\n")
    if n:
        seen += n
        os.write(1, b"ack %d\\n" % n)
with open(done_path + ".tmp", "w") as f:
    f.write(f"{first} {time.time()} {seen}")
os.rename(done_path + ".tmp", done_path)
for _ in iter(lambda: os.read(0, 1 << 20), b""):
    pass
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=500_000, metavar="N",
                        help="messages per case (default 500000)")
    parser.add_argument("--size", type=int, action="append",
                        help="only this payload size in bytes (repeatable; default 100, 1024)")
    parser.add_argument("--sink", choices=SINKS, action="append",
                        help="only this sink (repeatable; default: file, exec)")
    parser.add_argument("--codec", choices=CODECS, action="append",
                        help="only this codec (repeatable; default: all)")
    parser.add_argument("--path", choices=PATHS, action="append",
                        help="only this decoder path (repeatable; default: both; pure = "
                             "ZKCONSUMER_PURE=1 in the run process)")
    parser.add_argument("--batch-size", type=int, default=5000, metavar="N",
                        help="zkconsumer run --batch-size (default 5000)")
    parser.add_argument("--dir", metavar="DIR", help="work directory (default: temporary)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="give up on a case after S seconds (default 300)")
    parser.epilog = ("examples:\n  zkconsumer bench daemon --sink file --size 100 --codec none\n"
                     "  zkconsumer bench daemon --messages 100000 --path pure\n\n"
                     "exit status: 0 done, 1 error, 2 usage")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


class Figure(NamedTuple):
    """One case's result (seconds from the spawn of ``zkconsumer run``)."""

    total: float   # until the sink had every message
    steady: float  # from the first message at the sink until the last
    cpu: float     # CPU seconds of the run process (user + system) when done


def _env(path: str) -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(zkconsumer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    if path == "pure":
        env["ZKCONSUMER_PURE"] = "1"
    else:
        env.pop("ZKCONSUMER_PURE", None)
    return env


def _payloads(size: int) -> list[bytes]:
    """A few distinct newline-free payloads of ``size`` bytes, cycled by the producer."""
    base = b"abcdefghijklmnopqrstuvwxyz0123456789"
    return [(bytes([base[i % len(base)]]) + base * (size // len(base) + 1))[:size]
            for i in range(64)]


def _produce(cluster: DevCluster, topic: str, n: int, size: int, codec: Compression) -> float:
    """Send ``n`` messages to ``topic`` (the Producer's ``compression.codec`` = ``codec``) and
    wait until the broker's flush shows all of them; return the seconds it took."""
    payloads = _payloads(size)
    started = time.perf_counter()
    with Producer(zk_connect=cluster.zk_connect, compression_codec=codec,
                  confirm=True) as producer:
        # compressed: one send (one wrapper) per batch.size messages, the Producer's default
        batch = (producer.config.batch_size if codec != Compression.NONE
                 else max(1, min(2000, 900_000 // (size + 30))))
        producer.send(topic, payloads[0])
        sent = 1
        while sent < n:
            k = min(batch, n - sent)
            producer.send(topic, [payloads[(sent + i) % 64] for i in range(k)])
            sent += k
    _wait_flushed(cluster, topic)
    return time.perf_counter() - started


def _wait_flushed(cluster: DevCluster, topic: str, timeout: float = 60.0) -> None:
    """Every produce was confirmed (appended); wait until the flushed ends of the partitions
    stop moving for several flush intervals, so a case does not wait for the broker."""
    host, _, port = cluster.brokers[0].address.rpartition(":")
    deadline = time.monotonic() + timeout
    with SimpleConsumer(host, int(port)) as reader:
        last, since = None, time.monotonic()
        while True:
            ends = [reader.latest_offset(topic, p) for p in range(PARTITIONS)]
            if ends != last:
                last, since = ends, time.monotonic()
            elif time.monotonic() - since >= 0.3:  # 6 flush intervals of 50 ms
                return
            if time.monotonic() > deadline:
                raise ZkConsumerError(f"bench: {topic} still not flushed after {timeout}s")
            time.sleep(0.02)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    # after "pid (comm)": field 3 (state) is fields[0]; utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _compiled_loaded(pid: int) -> bool:
    """Whether the compiled decoder (``_speedups``) is mapped into process ``pid``."""
    with open(f"/proc/{pid}/maps", "rb") as f:
        return b"_speedups" in f.read()


def _run_case(cluster: DevCluster, workdir: Path, sink: str, size: int, topic: str,
              path: str, args: argparse.Namespace, case: str) -> Figure:
    group = f"bench-{case}"
    argv = [sys.executable, "-m", "zkconsumer", "run", "--zk", cluster.zk_connect,
            "--group", group, "--topic", topic, "--batch-size", str(args.batch_size),
            "--max-in-flight", str(max(4 * args.batch_size, 20000)),
            "--set", "fetch.size=4194304", "--set", "queuedchunks.max=4",
            "--log-level", "WARNING"]
    done = workdir / f"done-{case}"
    out = workdir / f"out-{case}.txt"
    for stale in (done, out):
        if stale.exists():
            stale.unlink()
    if sink == "file":
        argv += ["--output", str(out), "--format", "lines"]
        want = args.messages * (size + 1)
    else:
        child = workdir / "child.py"
        child.write_text(textwrap.dedent(_CHILD))
        argv += ["--exec", f"exec '{sys.executable}' '{child}' {args.messages} '{done}'",
                 "--format", "jsonl"]
    log_path = workdir / f"run-{case}.log"
    log = open(log_path, "wb")  # noqa: SIM115 - closed below
    started = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=_env(path))
    first = None
    try:
        deadline = time.monotonic() + args.timeout
        while True:
            if proc.poll() is not None:
                raise ZkConsumerError(f"zkconsumer run exited with {proc.returncode}; see "
                                      f"{log_path}")
            if time.monotonic() > deadline:
                raise ZkConsumerError(f"case {case} timed out")
            if sink == "file":
                have = out.stat().st_size if out.exists() else 0
                if have and first is None:
                    first = time.time()
                if have >= want:
                    finished = time.time()
                    break
            elif done.exists():
                first_s, end_s, _ = done.read_text().split()
                first, finished = float(first_s), float(end_s)
                break
            time.sleep(_POLL)
        cpu = _cpu_seconds(proc.pid)  # before terminating: shutdown is not part of the case
        if _compiled_loaded(proc.pid) != (path == "compiled"):
            raise ZkConsumerError(f"case {case}: zkconsumer run did not run the {path} "
                                  f"decoder")
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if out.exists():
            out.unlink()
    # a case shorter than one poll may see its first and last message at once: the steady
    # window is then known only to be under one poll interval (and must not be 0)
    return Figure(finished - started, max(finished - (first or started), _POLL), cpu)


def main(args: argparse.Namespace) -> int:
    sizes = args.size or list(SIZES)
    sinks = args.sink or list(SINKS)
    codecs = args.codec or list(CODECS)
    paths = [p for p in (args.path or list(PATHS))
             if p == "pure" or accel.speedups is not None]
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="zkc-bench-daemon-"))
    base.mkdir(parents=True, exist_ok=True)
    cleanup = not args.dir  # a temporary directory holds GBs of topics: remove it at the end
    stamp = f"{int(time.time())}-{os.getpid()}"  # fresh topics even in a reused --dir
    cluster = DevCluster(base / "cluster", brokers=1, num_partitions=PARTITIONS,
                         log_file_size=512 * 1024 * 1024, flush_interval=10000,
                         flush_interval_ms=50, flush_scheduler_interval_ms=50)
    cluster.start()
    try:
        print(f"# decoder: {accel.IMPLEMENTATION} by default; {accel.REASON}; pure = "
              f"zkconsumer run with ZKCONSUMER_PURE=1", flush=True)
        topics: dict[tuple[int, str], str] = {}
        case = 0
        for sink in sinks:
            for size in sizes:
                for codec_name in codecs:
                    key = (size, codec_name)
                    if key not in topics:  # produced once, read by every sink and path
                        topics[key] = f"bench-{size}-{codec_name}-{stamp}"
                        _produce(cluster, topics[key], args.messages, size,
                                 Compression[codec_name.upper()])
                    for path in paths:
                        case += 1
                        name = f"{stamp}-{case}-{sink}-{size}-{codec_name}-{path}"
                        fig = _run_case(cluster, base, sink, size, topics[key], path, args,
                                        name)
                        label = "file lines" if sink == "file" else "exec jsonl"
                        n = args.messages
                        print(f"{label} {size}B {codec_name} {path}: {n / fig.total:.0f} msg/s "
                              f"({n * size / fig.total / 1e6:.1f} MB/s, "
                              f"{fig.cpu / n * 1e6:.3f} CPU s/M msg) [steady "
                              f"{n / fig.steady:.0f} msg/s after "
                              f"{fig.total - fig.steady:.2f}s start-up]", flush=True)
    finally:
        cluster.stop()
        if cleanup:
            shutil.rmtree(base, ignore_errors=True)
    return 0
