"""``zkconsumer run --exec`` and ``--handler`` against real brokers and ZooKeeper.

* kill -9 of the exec child mid-run: the daemon restarts it and redelivers; every produced
  message reaches a child, and after SIGTERM the committed offsets are the log ends;
* a handler that raises does not move the partition's offset (checked in the offsets
  znode); with a dead letter the batch goes there after the retries and consumption resumes.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from daemon_it_helpers import (
    DaemonProcess,
    committed,
    log_ends,
    produce,
    read_lines,
    values,
)
from fixtures.waiting import wait_until
from kazoo.client import KazooClient

from zkconsumer.client.simple import SimpleConsumer

CHILD = """
import os, sys
rec = open(sys.argv[1], "ab")
with open(sys.argv[2] + "." + os.environ["ZKCONSUMER_RESTARTS"], "w") as f:
    f.write(str(os.getpid()))
buf = b""
while True:
    chunk = os.read(0, 65536)
    if not chunk:
        break
    buf += chunk
    *lines, buf = buf.split(b"\\n")
    if lines:
        rec.write(b"".join(line + b"\\n" for line in lines)); rec.flush()
        os.write(1, b"ack %d\\n" % len(lines))
"""

HANDLER = """
import os

def handle(batch):
    if any(b"poison" in m.value for m in batch):
        raise ValueError("cannot process poison")
    with open(os.environ["HANDLER_OUT"], "ab") as f:
        f.write(b"".join(m.value + b"\\n" for m in batch))
"""


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v > 0}


def test_exec_child_kill_9_loses_nothing(tmp_path: Path, dev_broker: Any, zk_connect: str,
                                         zk_client: KazooClient) -> None:
    brokers = dev_broker.many(2, num_partitions=2)
    first = values("e", 600)
    produce(zk_connect, "ev", first)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    rec, pidfile = tmp_path / "received.jsonl", tmp_path / "child.pid"
    cmd = f"exec '{os.sys.executable}' '{script}' '{rec}' '{pidfile}'"
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--exec", cmd, "--format", "jsonl", "--restart-backoff", "0.1",
        "--set", "autocommit.interval.ms=200", "--max-in-flight", "300"])
    more = values("e", 1000, start=600)
    producer = threading.Thread(target=produce, args=(zk_connect, "ev", more, 20))
    try:
        wait_until(lambda: len(read_lines(rec)) >= 300, what="child received messages")
        producer.start()
        pid = int(wait_until(lambda: (tmp_path / "child.pid.0").read_text(), what="pid"))
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: (tmp_path / "child.pid.1").exists(), what="child restarted")
        producer.join(60)
        expected = set(first + more)

        def received() -> set[bytes]:
            return {json.loads(line)["value"].encode() for line in read_lines(rec)}

        wait_until(lambda: received() >= expected, timeout=30, what="all messages at a child")
        assert received() == expected
        assert "sink_restart" in d.log
        assert d.stop() == 0, d.log
        assert _nonzero(committed(zk_client, "g", "ev")) == _nonzero(log_ends(brokers, "ev"))
    finally:
        d.close()
        if producer.is_alive():
            producer.join(60)


def _handler_daemon(tmp_path: Path, zk_connect: str, name: str, *extra: str) -> DaemonProcess:
    (tmp_path / "poison_handler.py").write_text(textwrap.dedent(HANDLER))
    env = dict(os.environ, HANDLER_OUT=str(tmp_path / "handled.txt"))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]),
                                         env.get("PYTHONPATH", "")])
    return DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--handler", "poison_handler:handle", "--batch-size", "5",
        "--retry-backoff", "0.05", "--retry-backoff-max", "0.1",
        "--set", "autocommit.interval.ms=100", *extra], name=name, env=env, cwd=tmp_path)


def test_handler_error_holds_offset_then_dead_letter(tmp_path: Path, dev_broker: Any,
                                                     zk_connect: str,
                                                     zk_client: KazooClient) -> None:
    broker = dev_broker(num_partitions=1)
    good1, good2 = values("good", 10), values("good", 10, start=10)
    produce(zk_connect, "ev", good1)
    produce(zk_connect, "ev", [b"poison-1"])
    produce(zk_connect, "ev", good2)
    consumer = SimpleConsumer(broker.host, broker.port)
    msgs = list(consumer.iter_messages("ev", 0, 0))
    consumer.close()
    poison_offset = next(m.offset for m in msgs if m.value == b"poison-1")
    end = msgs[-1].next_offset
    handled = tmp_path / "handled.txt"

    d = _handler_daemon(tmp_path, zk_connect, "d1", "--max-retries", "2")
    try:
        wait_until(lambda: read_lines(handled) == good1, what="messages before the poison")
        wait_until(lambda: committed(zk_client, "g", "ev").get("0-0") == poison_offset,
                   what="offset committed up to the poison message")
        wait_until(lambda: d.log.count("handler failed") >= 4, what="retries")
        # no dead letter configured: it keeps retrying and never skips the poison message
        assert committed(zk_client, "g", "ev")["0-0"] == poison_offset
        assert read_lines(handled) == good1
        assert d.stop() == 0, d.log
    finally:
        d.close()
    assert committed(zk_client, "g", "ev")["0-0"] == poison_offset

    dead = tmp_path / "dead.jsonl"
    d2 = _handler_daemon(tmp_path, zk_connect, "d2", "--max-retries", "1", "--dead-letter",
                         str(dead))
    try:
        # the failing batch (5 messages from the poison on) goes to the dead letter whole
        wait_until(lambda: read_lines(handled) == good1 + good2[4:],
                   what="rest after dead letter")
        try:
            wait_until(lambda: committed(zk_client, "g", "ev").get("0-0") == end,
                       what="offset at the log end")
        except AssertionError as exc:  # seen once in ~80 runs: keep what tells why
            raise AssertionError(f"{exc}: committed {committed(zk_client, 'g', 'ev')}, log "
                                 f"end {end}; the daemon's log:\n{d2.log[-4000:]}") from None
        records = [json.loads(line) for line in read_lines(dead)]
        assert [base64.b64decode(r["value_base64"]) for r in records] == [b"poison-1",
                                                                          *good2[:4]]
        assert records[0]["offset"] == poison_offset and records[0]["attempts"] == 2
        assert "ValueError" in records[0]["error"]
        assert d2.stop() == 0, d2.log
    finally:
        d2.close()


STUCK = """
import os, time

def handle(batch):
    open(os.environ["HANDLER_OUT"], "w").write("called")
    time.sleep(3600)  # never returns
"""


def test_sigterm_with_stuck_handler_exits_in_bounded_time(tmp_path: Path, dev_broker: Any,
                                                          zk_connect: str,
                                                          zk_client: KazooClient) -> None:
    dev_broker(num_partitions=1)
    produce(zk_connect, "ev", values("s", 10))
    (tmp_path / "stuck_handler.py").write_text(textwrap.dedent(STUCK))
    marker = tmp_path / "called"
    env = dict(os.environ, HANDLER_OUT=str(marker))
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[3]),
                                         env.get("PYTHONPATH", "")])
    d = DaemonProcess(tmp_path, zk_connect, "g", [
        "--topic", "ev", "--handler", "stuck_handler:handle", "--set",
        "autocommit.interval.ms=100", "--shutdown-timeout", "1"], env=env, cwd=tmp_path)
    try:
        wait_until(marker.exists, what="handler called")
        started = time.monotonic()
        assert d.stop(timeout=20) == 0, d.log
        assert time.monotonic() - started < 6  # --shutdown-timeout 1, then commit and leave
        assert "shutdown timeout" in d.log
        # nothing was acknowledged, so nothing past the first message was committed
        assert committed(zk_client, "g", "ev").get("0-0", 0) == 0
        assert zk_client.get_children("/consumers/g/ids") == []
    finally:
        d.close()


def test_exec_rebalance_mid_stream_loses_nothing(tmp_path: Path, dev_broker: Any,
                                                 zk_connect: str,
                                                 zk_client: KazooClient) -> None:
    brokers = dev_broker.many(2, num_partitions=2)
    produce(zk_connect, "ev", values("r", 300))
    script = tmp_path / "child.py"
    script.write_text(CHILD)

    def member(name: str) -> tuple[DaemonProcess, Path]:
        rec = tmp_path / f"{name}.jsonl"
        cmd = f"exec '{os.sys.executable}' '{script}' '{rec}' '{tmp_path / name}.pid'"
        return DaemonProcess(tmp_path, zk_connect, "g", [
            "--topic", "ev", "--exec", cmd, "--format", "jsonl", "--revoke-timeout", "2",
            "--set", "autocommit.interval.ms=200", "--set", "rebalance.backoff.ms=500"],
            name=name), rec

    more = values("r", 1500, start=300)
    producer = threading.Thread(target=produce, args=(zk_connect, "ev", more, 10))
    a, rec_a = member("a")
    b: DaemonProcess | None = None
    try:
        wait_until(lambda: len(read_lines(rec_a)) >= 300, what="a consumed the backlog")
        producer.start()
        b, rec_b = member("b")  # joins mid-stream: a revokes half of its partitions
        b.wait_stable()
        assert a.stop() == 0, a.log  # and leaves mid-stream: b takes everything
        producer.join(60)

        def received() -> set[bytes]:
            return {json.loads(line)["value"].encode()
                    for line in read_lines(rec_a) + read_lines(rec_b)}

        expected = set(values("r", 300) + more)
        wait_until(lambda: received() >= expected, timeout=30, what="every message at a child")
        assert received() == expected
        assert b.stop() == 0, b.log
        assert _nonzero(committed(zk_client, "g", "ev")) == _nonzero(log_ends(brokers, "ev"))
    finally:
        a.close()
        if b is not None:
            b.close()
        if producer.is_alive():
            producer.join(60)
