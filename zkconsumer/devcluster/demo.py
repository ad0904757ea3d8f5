"""``zkconsumer demo``: the whole story on a fresh machine, in well under a minute.

1. start ZooKeeper and two dev brokers (`DevCluster`, in a temporary directory), each with
   ``topic.partition.count.map=demo:4`` -- 8 partitions in all;
2. produce once to each broker so the topic materialises (brokers register a topic in
   ZooKeeper on its first message), then produce the first half of the sample messages;
3. start two ``zkconsumer run`` daemons (real subprocesses) in one group, each appending to
   its own ``--output`` file, and show the assignment with ``zkconsumer group describe``;
4. show messages flowing (count per daemon, sample lines), produce the second half while they
   run, and verify that **every produced message was consumed**; then print what
   ``zkconsumer monitor --once`` says of the group (with ``--monitor-port`` the monitor also
   serves its page during the whole demo, and ``--hold`` keeps everything running for it);
5. stop everything cleanly: SIGTERM to the daemons (they commit and leave the group), then the
   brokers and ZooKeeper.  Exit status 0 only if the verification passed and every daemon
   exited 0.

Everything it runs is an ordinary command, printed as it goes, so the output doubles as a
tutorial.  Only this module prints (it is CLI code).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TypeVar

import zkconsumer
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.errors import ZkConsumerError
from zkconsumer.producer import Producer
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

HELP = "run the end-to-end demo: ZooKeeper, 2 brokers, producer, 2 consumer daemons"

TOPIC = "demo"
GROUP = "demo-group"
PARTITIONS_PER_BROKER = 4
T = TypeVar("T")


EPILOG = """\
Needs Java (for ZooKeeper) like `zkconsumer dev-cluster`; everything else is this package.
Every step prints the ordinary command it runs, so the output doubles as a tutorial.

examples:
  zkconsumer demo
  zkconsumer demo --messages 10000 --timeout 90
  zkconsumer demo --dir /tmp/zkc-demo --keep     (then look at the logs and output files)
  zkconsumer demo --monitor-port 8470 --hold     (the monitor's page on the demo cluster,
                                                  open until Ctrl-C)

exit status: 0 every produced message was consumed and every daemon stopped cleanly,
1 verification failed, a daemon exited non-zero or an error (e.g. no Java), 2 usage,
130 interrupted (Ctrl-C; the cluster is stopped first; with --hold, Ctrl-C after the
verification is the normal end and the status is the verification's)
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--messages", type=int, default=2000, metavar="N",
                        help="sample messages to produce (default 2000)")
    parser.add_argument("--dir", metavar="DIR",
                        help="work directory (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (logs, broker data, consumer output)")
    parser.add_argument("--timeout", type=float, default=40.0, metavar="S",
                        help="give up waiting for the consumers after S seconds (default 40)")
    parser.add_argument("--monitor-port", type=int, metavar="P",
                        help="also run `zkconsumer monitor` on the cluster with its page on "
                             "http://127.0.0.1:P/ (0 = any free port; default: no page, "
                             "only the one-shot evaluation at the end)")
    parser.add_argument("--hold", action="store_true",
                        help="after verifying, keep the cluster, the daemons and the monitor "
                             "running until Ctrl-C (to look at the page)")


def _say(text: str = "") -> None:
    print(text, flush=True)


def _step(n: int, text: str) -> None:
    _say(f"\n== {n}. {text}")


def _wait(predicate: Callable[[], T], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ZkConsumerError(f"demo: timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def _env() -> dict[str, str]:
    """Environment for child ``zkconsumer`` processes: this very package on PYTHONPATH."""
    env = dict(os.environ)
    root = str(Path(zkconsumer.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _zkconsumer(*args: str) -> list[str]:
    return [sys.executable, "-m", "zkconsumer", *args]


def _lines(path: Path) -> list[bytes]:
    if not path.exists():
        return []
    data = path.read_bytes()
    return data[:data.rfind(b"\n") + 1].splitlines()


class _Daemon:
    def __init__(self, name: str, workdir: Path, zk: str) -> None:
        self.name = name
        self.output = workdir / f"{name}.txt"
        self.log_path = workdir / f"{name}.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.argv = _zkconsumer("run", "--zk", zk, "--group", GROUP, "--topic", TOPIC,
                                "--output", str(self.output),
                                "--set", "autocommit.interval.ms=500")
        # own session: a Ctrl-C in the terminal reaches only the demo, which stops the
        # daemons in order (SIGTERM: commit and leave) -- the normal end of --hold
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self._log,
                                     env=_env(), start_new_session=True)

    def stable(self) -> bool:
        if self.proc.poll() is not None:
            raise ZkConsumerError(f"demo: {self.name} exited with {self.proc.returncode}; "
                                  f"see {self.log_path}")
        return "consumer state STABLE" in self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> int:
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        finally:
            self._log.close()


@contextlib.contextmanager
def _workdir(args: argparse.Namespace) -> Iterator[Path]:
    if args.dir:
        path = Path(args.dir)
        path.mkdir(parents=True, exist_ok=True)
    else:
        path = Path(tempfile.mkdtemp(prefix="zkconsumer-demo-"))
    try:
        yield path
    finally:
        if args.keep:
            _say(f"\nkept {path} (daemon logs consumer-*.log, outputs consumer-*.txt, "
                 "broker data)")
        else:
            shutil.rmtree(path, ignore_errors=True)


def _produce(producer: Producer, values: list[bytes]) -> None:
    """20 messages per request, each request to a random partition (no key)."""
    for i in range(0, len(values), 20):
        producer.send(TOPIC, values[i:i + 20])


def _materialise(cluster: DevCluster, producer: Producer, produced: list[bytes]) -> None:
    """Produce until every broker registered the topic (brokers register on first data)."""
    session = ZkSession(cluster.zk_connect)
    session.start()
    try:
        deadline = time.monotonic() + 15
        n = 0
        while len(read_topic_partitions(session, TOPIC)) < cluster.num_brokers:
            if time.monotonic() > deadline:
                raise ZkConsumerError("demo: the brokers did not register the topic")
            value = f"hello {n}".encode()
            producer.send(TOPIC, value, key=str(n))
            produced.append(value)
            n += 1
            time.sleep(0.05)
        counts = read_topic_partitions(session, TOPIC)
    finally:
        session.close()
    _say(f"topic {TOPIC!r} registered: " + ", ".join(
        f"broker {b}: {c} partitions" for b, c in counts.items())
         + f" ({sum(counts.values())} in all)")


def _describe(zk: str) -> None:
    argv = _zkconsumer("group", "describe", "--zk", zk, "--group", GROUP)
    _say("$ zkconsumer group describe --zk " + shlex.quote(zk) + f" --group {GROUP}")
    out = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=60)
    text = out.stdout.rstrip() or out.stderr.rstrip()
    _say("\n".join("    " + line for line in text.splitlines()))


def main(args: argparse.Namespace) -> int:
    if args.messages < 2:
        raise ZkConsumerError("demo: --messages must be at least 2")
    started = time.monotonic()
    if logging.getLogger().getEffectiveLevel() >= logging.INFO:
        logging.getLogger("zkconsumer").setLevel(logging.WARNING)  # the story is on stdout
    with _workdir(args) as workdir:
        _step(1, f"start ZooKeeper and 2 dev brokers in {workdir}")
        cluster = DevCluster(workdir, brokers=2,
                             topic_partitions={TOPIC: PARTITIONS_PER_BROKER})
        cluster.start()
        daemons: list[_Daemon] = []
        monitor: _Monitor | None = None
        status = 1
        try:
            _say(f"zookeeper: {cluster.zk_connect}")
            _say(f"brokers:   {cluster.broker_list}")
            if args.monitor_port is not None:
                monitor = _Monitor(workdir, cluster.zk_connect, args.monitor_port,
                                   args.timeout)
            status = _run(args, cluster, workdir, daemons)
            _evaluate(cluster.zk_connect)
            if args.hold:
                _hold(monitor)
        finally:
            if monitor is not None:
                monitor.stop()
            _step(6, "shut down: SIGTERM the daemons, then the brokers and ZooKeeper")
            for d in daemons:
                rc = d.stop()
                _say(f"{d.name} exited with status {rc}")
                if rc != 0:
                    status = 1
            if daemons and status == 0:
                _say("the daemons committed their offsets and left the group:")
                _describe(cluster.zk_connect)
            cluster.stop()
            _say("cluster stopped")
    _say(f"\ndemo {'finished' if status == 0 else 'FAILED'} in "
         f"{time.monotonic() - started:.1f}s")
    return status


def _run(args: argparse.Namespace, cluster: DevCluster, workdir: Path,
         daemons: list[_Daemon]) -> int:
    zk = cluster.zk_connect
    half = args.messages // 2
    first = [f"demo message {i:06d}".encode() for i in range(half)]
    second = [f"demo message {i:06d}".encode() for i in range(half, args.messages)]
    produced: list[bytes] = []

    _step(2, f"produce: materialise topic {TOPIC!r}, then {len(first)} messages")
    with Producer(zk_connect=zk) as producer:
        _materialise(cluster, producer, produced)
        _produce(producer, first)
        produced.extend(first)
        _say(f"produced {len(produced)} messages")

        _step(3, f"start 2 consumer daemons in group {GROUP!r}")
        for i in (1, 2):
            d = _Daemon(f"consumer-{i}", workdir, zk)
            daemons.append(d)
            _say("$ zkconsumer " + " ".join(shlex.quote(a) for a in d.argv[3:]))
        _wait(lambda: all(d.stable() for d in daemons), args.timeout, "the daemons to join")
        session = ZkSession(zk)
        session.start()
        try:
            _wait(lambda: _owners_settled(session, daemons), args.timeout,
                  "all 8 partitions to be owned by the 2 daemons")
        finally:
            session.close()
        _describe(zk)

        _step(4, "messages flowing")
        _wait(lambda: _union(daemons) >= set(produced), args.timeout, "the first messages")
        _show_counts(daemons)
        _say(f"producing {len(second)} more while the daemons run ...")
        _produce(producer, second)
        produced.extend(second)

    _step(5, "verify")
    expected = set(produced)
    try:
        _wait(lambda: _union(daemons) >= expected, args.timeout, "every message")
    except ZkConsumerError as exc:
        missing = len(expected - _union(daemons))
        _say(f"NOT verified: {missing} of {len(expected)} produced messages missing ({exc})")
        return 1
    _show_counts(daemons)
    written = [line for d in daemons for line in _lines(d.output)]
    dups = sum(n - 1 for n in Counter(written).values())
    _say(f"verified: all {len(expected)} produced messages were consumed "
         f"({dups} duplicates)")
    return 0


class _Monitor:
    """``zkconsumer monitor`` on the demo cluster, serving its page while the demo runs."""

    def __init__(self, workdir: Path, zk: str, port: int, timeout: float) -> None:
        self.log_path = workdir / "monitor.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        argv = _zkconsumer("monitor", "--zk", zk, "--port", str(port), "--interval", "2",
                           "--window", "5")
        _say("$ zkconsumer " + " ".join(shlex.quote(a) for a in argv[3:]) + " &")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._log,
                                     env=_env(), start_new_session=True)
        self.url = _wait(self._url, timeout, "the monitor's page")
        _say(f"monitor page: {self.url} (JSON: {self.url}v1/groups, Prometheus: "
             f"{self.url}metrics)")

    def _url(self) -> str | None:
        if self.proc.poll() is not None:
            raise ZkConsumerError(f"demo: the monitor exited with {self.proc.returncode}; "
                                  f"see {self.log_path}")
        found = re.search(r"serving (http://\S+/) ", self.log_path.read_text(errors="replace"))
        return found.group(1) if found else None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


def _evaluate(zk: str) -> None:
    """The monitor's one-shot evaluation of the demo group (exit 0 = OK, 1 warn, 2 bad)."""
    argv = _zkconsumer("monitor", "--zk", zk, "--groups", f"^{GROUP}$", "--once")
    _say("the monitor's evaluation of the group (Burrow-style; docs/operations.md, "
         "\"Monitor\"):")
    _say("$ zkconsumer " + " ".join(shlex.quote(a) for a in argv[3:]))
    out = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=60)
    text = out.stdout.rstrip() or out.stderr.rstrip()
    _say("\n".join("    " + line for line in text.splitlines()))
    _say(f"    (exit status {out.returncode})")


def _hold(monitor: _Monitor | None) -> None:
    where = f"; the monitor's page is {monitor.url}" if monitor is not None else ""
    _say(f"\nholding the cluster and the daemons{where} -- Ctrl-C to shut down")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        _say("")
    finally:
        signal.signal(signal.SIGTERM, previous)


def _owners_settled(session: ZkSession, daemons: list[_Daemon]) -> bool:
    """All 8 partitions have an owner znode, held by as many members as there are daemons."""
    base = f"/consumers/{GROUP}/owners/{TOPIC}"
    children = session.get_children(base)
    if len(children) < 2 * PARTITIONS_PER_BROKER or not all(d.stable() for d in daemons):
        return False
    members = set()
    for child in children:
        value = session.get(f"{base}/{child}")
        if value is None:
            return False
        members.add(value.decode().rsplit("-", 1)[0])  # thread id = <consumer id>-<n>
    return len(members) == len(daemons)


def _union(daemons: list[_Daemon]) -> set[bytes]:
    return {line for d in daemons for line in _lines(d.output)}


def _show_counts(daemons: list[_Daemon]) -> None:
    for d in daemons:
        lines = _lines(d.output)
        _say(f"{d.name}: {len(lines)} messages in {d.output.name}")
        for line in lines[:3]:
            _say(f"    {line.decode(errors='replace')}")
