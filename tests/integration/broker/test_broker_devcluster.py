"""`zkconsumer dev-cluster` and `DevCluster`: a real ZooKeeper plus N brokers, up and down."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from broker_wire import Wire
from kazoo.client import KazooClient

import zkconsumer
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import encode_message_set

MSG = encode_message_set([b"0123456789"])


def _read_line(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> str:
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n") and time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
    return line.decode().strip()


@pytest.mark.slow
def test_dev_cluster_command_prints_connect_string_and_stops_on_sigterm(tmp_path):
    root = Path(zkconsumer.__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen([sys.executable, "-m", "zkconsumer", "dev-cluster", "--brokers", "2",
                             "--dir", str(tmp_path / "dc"), "--chroot", "/kafka",
                             "--num-partitions", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        zk_line, brokers_line = _read_line(proc), _read_line(proc)
        assert zk_line.startswith("zookeeper: 127.0.0.1:") and zk_line.endswith("/kafka")
        assert brokers_line.startswith("brokers: ")
        connect = zk_line.split(": ", 1)[1]
        brokers = {}
        for item in brokers_line.split(": ", 1)[1].split(","):
            broker_id, host, port = item.split(":")
            brokers[int(broker_id)] = (host, int(port))
        assert sorted(brokers) == [0, 1]
        zk = KazooClient(hosts=connect, timeout=10.0)
        zk.start(timeout=30)
        try:
            for broker_id, (host, port) in brokers.items():
                data, _ = zk.get(f"/brokers/ids/{broker_id}")
                assert data.endswith(f":{host}:{port}".encode())
                with Wire(host, port) as w:
                    w.produce("dc", 2, MSG)
                    assert w.end("dc", 2) == 20
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        finally:
            zk.stop()
            zk.close()
        assert (tmp_path / "dc" / "broker-0" / ".kafka_cleanshutdown").exists()
        assert (tmp_path / "dc" / "broker-1" / "dc-2" / "00000000000000000000.kafka").read_bytes() \
            == MSG
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_dev_cluster_in_process(tmp_path):
    with DevCluster(tmp_path / "c", brokers=2, in_process=True, num_partitions=2,
                    topic_partitions={"wide": 5}) as cluster:
        assert cluster.broker_list == ",".join(
            f"{b.broker_id}:127.0.0.1:{b.port}" for b in cluster.brokers)
        zk = KazooClient(hosts=cluster.zk_connect, timeout=10.0)
        zk.start(timeout=30)
        try:
            assert sorted(zk.get_children("/brokers/ids")) == ["0", "1"]
            b = cluster.brokers[1]
            with Wire(b.host, b.port) as w:
                w.produce("wide", 4, MSG)
                assert w.end("wide", 4) == 20
            assert cluster.brokers[1].broker.registrar.wait_idle(10)
            assert zk.get("/brokers/topics/wide/1")[0] == b"5"
        finally:
            zk.stop()
            zk.close()
    assert not cluster.zookeeper.is_running()


def test_dev_cluster_validates_its_arguments(tmp_path):
    with pytest.raises(ConfigurationError):
        DevCluster(tmp_path, brokers=0)
    with pytest.raises(ConfigurationError):
        DevCluster(tmp_path, brokers=2, broker_ports=[9092])
    with pytest.raises(ConfigurationError):
        DevCluster(tmp_path, chroot="kafka")
