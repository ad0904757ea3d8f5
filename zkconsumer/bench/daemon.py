"""``zkconsumer bench daemon``: end-to-end throughput of ``zkconsumer run``.

For each case a fresh topic is pre-produced on a local dev cluster (ZooKeeper + one dev
broker with 4 partitions), then a ``zkconsumer run`` subprocess is started and timed from
its start until every message reached the sink:

* ``file lines``  -- ``--output FILE --format lines``; done when the file has every byte;
* ``exec jsonl``  -- ``--exec CHILD --format jsonl``; CHILD reads stdin in chunks and
  acknowledges each chunk with one ``ack N`` line, and reports when it has seen all lines.

Printed per case: ``file lines 100B: 523456 msg/s (52.3 MB/s)`` -- the start-to-done rate,
which includes interpreter start-up and joining the group -- followed by the steady rate
measured from the first message written.  MB/s counts payload bytes (10**6 per MB).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import zkconsumer
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.errors import ZkConsumerError
from zkconsumer.producer import Producer

HELP = "measure zkconsumer run end to end: --output file and --exec jsonl, 100B and 1KiB"

SIZES = (100, 1024)
SINKS = ("file", "exec")

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
    parser.add_argument("--batch-size", type=int, default=5000, metavar="N",
                        help="zkconsumer run --batch-size (default 5000)")
    parser.add_argument("--dir", metavar="DIR", help="work directory (default: temporary)")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="give up on a case after S seconds (default 300)")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(zkconsumer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _payloads(size: int) -> list[bytes]:
    """A few distinct newline-free payloads of ``size`` bytes, cycled by the producer."""
    base = b"abcdefghijklmnopqrstuvwxyz0123456789"
    return [(bytes([base[i % len(base)]]) + base * (size // len(base) + 1))[:size]
            for i in range(64)]


def _produce(zk: str, topic: str, n: int, size: int) -> float:
    payloads = _payloads(size)
    batch = max(1, min(2000, 900_000 // (size + 30)))
    started = time.perf_counter()
    with Producer(zk_connect=zk) as producer:
        producer.send(topic, payloads[0])
        sent = 1
        while sent < n:
            k = min(batch, n - sent)
            producer.send(topic, [payloads[(sent + i) % 64] for i in range(k)])
            sent += k
    return time.perf_counter() - started


def _run_case(cluster: DevCluster, workdir: Path, sink: str, size: int,
              args: argparse.Namespace, case: int) -> tuple[float, float]:
    topic, group = f"bench-{sink}-{size}-{case}", f"bench-{case}"
    _produce(cluster.zk_connect, topic, args.messages, size)
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
    log = open(workdir / f"run-{case}.log", "wb")  # noqa: SIM115 - closed below
    started = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log, env=_env())
    first = None
    try:
        deadline = time.monotonic() + args.timeout
        while True:
            if proc.poll() is not None:
                raise ZkConsumerError(f"zkconsumer run exited with {proc.returncode}; see "
                                      f"{workdir / f'run-{case}.log'}")
            if time.monotonic() > deadline:
                raise ZkConsumerError(f"case {sink} {size}B timed out")
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
            time.sleep(0.005)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        if out.exists():
            out.unlink()
    total = finished - started
    steady = finished - (first or started)
    return total, steady


def main(args: argparse.Namespace) -> int:
    sizes = args.size or list(SIZES)
    sinks = args.sink or list(SINKS)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="zkc-bench-daemon-"))
    base.mkdir(parents=True, exist_ok=True)
    cluster = DevCluster(base / "cluster", brokers=1, num_partitions=4,
                         log_file_size=512 * 1024 * 1024)
    cluster.start()
    try:
        case = 0
        for sink in sinks:
            for size in sizes:
                case += 1
                total, steady = _run_case(cluster, base, sink, size, args, case)
                label = "file lines" if sink == "file" else "exec jsonl"
                n = args.messages
                print(f"{label} {size}B: {n / total:.0f} msg/s ({n * size / total / 1e6:.1f} "
                      f"MB/s) [steady {n / steady:.0f} msg/s after "
                      f"{total - steady:.2f}s start-up]", flush=True)
    finally:
        cluster.stop()
    return 0
