"""The ``kafka07`` source and ``zkconsumer export`` on a real standalone cluster (issue 13).

One cluster (master + two 1-core workers, `fixtures.spark.spark_cluster`) serves the session,
and one driver process serves this module: a driver JVM takes 10-60 s to start on this
machine, so the tests send it Python snippets (`ClusterDriver.run`) instead of starting one
per check.  The driver has the environment the README's install gives a user -- no
``PYTHONPATH`` -- so the format name resolves through PySpark's own discovery and the
executors import zkconsumer from the editable install.  The format-name read runs first,
before any export (which registers the source explicitly) has run in the driver.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fixtures.spark import SparkCluster
from fixtures.waiting import wait_until
from kafka07_data import ProducedCluster, Row, fill

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import Compression, decode_message_set, encode_message_set
from zkconsumer.protocol.logformat import segment_name
from zkconsumer.zk.registry import read_topic_partitions
from zkconsumer.zk.session import ZkSession

pytestmark = pytest.mark.slow

MARK = "@@zkc-driver@@"

# A driver that runs snippets sent on stdin (one JSON line each) with ``spark`` in scope and
# answers one marked JSON line with the snippet's ``result`` (or its traceback).
DRIVER = r"""
import contextlib, io, json, sys, traceback
from pyspark.sql import SparkSession

master, conf = sys.argv[1], json.loads(sys.argv[2])
builder = SparkSession.builder.master(master).appName("zkconsumer-cluster-tests")
for k, v in conf.items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
ns = {"spark": spark}
print("@MARK@" + json.dumps({"ok": True, "result": "ready"}), flush=True)
for line in sys.stdin:
    ns.pop("result", None)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(json.loads(line), ns)
        answer = {"ok": True, "result": ns.get("result"), "stdout": out.getvalue()}
    except BaseException:
        answer = {"ok": False, "error": traceback.format_exc(), "stdout": out.getvalue()}
    print("@MARK@" + json.dumps(answer), flush=True)
spark.stop()
""".replace("@MARK@", MARK)


class ClusterDriver:
    """One long-lived driver process on the cluster."""

    def __init__(self, cluster: SparkCluster, cwd: Path) -> None:
        self.cwd = cwd
        self.log = (cwd.parent / "driver.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, cluster.master_url, json.dumps(cluster.driver_conf())],
            cwd=cwd, env=cluster.driver_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True)
        assert self._answer() == "ready"

    def _answer(self) -> Any:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(MARK):
                answer = json.loads(line[len(MARK):])
                assert answer["ok"], answer["error"]
                if answer["result"] is None:
                    return answer["stdout"]
                return answer["result"]
        raise AssertionError(f"the driver exited ({self.proc.wait()}); see driver.log")

    def run(self, code: str) -> Any:
        """Run ``code`` in the driver; its ``result`` variable (or, if unset, its stdout)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(code) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def driver(spark_cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ClusterDriver]:
    cwd = tmp_path_factory.mktemp("cluster-driver") / "cwd"  # never an output's parent
    cwd.mkdir()
    d = ClusterDriver(spark_cluster, cwd)
    yield d
    d.close()
    assert not list(cwd.iterdir())  # nothing was written relative to the working directory


def test_cluster_read_by_format_name_without_register(
        driver: ClusterDriver, spark_cluster: SparkCluster,
        produced_cluster: ProducedCluster) -> None:
    # The README snippet as written; no register() call has run in this driver yet.
    result = driver.run(f"""
df = (spark.read.format("kafka07")
      .option("zookeeper.connect", {produced_cluster.zk_connect!r})
      .option("topic", "events")
      .load())
rows = [[r.topic, r.broker_id, r.partition, r.offset, r.next_offset, bytes(r.value).hex()]
        for r in df.collect()]
result = {{"rows": rows, "master": spark.sparkContext.master,
          "executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1}}
""")
    assert result["master"] == spark_cluster.master_url and result["executors"] == 2
    assert sorted((t, b, p, o, n, bytes.fromhex(v)) for t, b, p, o, n, v in result["rows"]) \
        == produced_cluster.rows()


def test_cluster_keyed_write(driver: ClusterDriver, produced_cluster: ProducedCluster,
                             zk_session: ZkSession) -> None:
    for b in produced_cluster.brokers:  # register "written" so keys route over 4 partitions
        with BrokerConnection(b.host, b.port) as conn:
            produce(conn, "written", 0, encode_message_set([]), confirm=True)
    wait_until(lambda: read_topic_partitions(zk_session, "written") == {0: 2, 1: 2},
               what="topic registration")
    zk = produced_cluster.zk_connect
    written = driver.run(f"""
keyed = spark.createDataFrame([(f"value-{{i}}", f"key-{{i % 7}}") for i in range(300)],
                              "value string, key string").repartition(2)
(keyed.write.format("kafka07").mode("append").option("zookeeper.connect", {zk!r})
 .option("topic", "written").option("compression", "gzip").save())
result = [[r.broker_id, r.partition, r.offset, bytes(r.value).decode()]
          for r in spark.read.format("kafka07").option("zookeeper.connect", {zk!r})
          .option("topic", "written").load().collect()]
""")
    assert Counter(v for *_, v in written) == Counter(f"value-{i}" for i in range(300))
    where: dict[int, set[tuple[int, int]]] = {}
    for b, p, _, v in written:
        where.setdefault(int(v.split("-")[1]) % 7, set()).add((b, p))
    assert all(len(places) == 1 for places in where.values())  # each key in one partition
    # grouped by destination: one gzip wrapper per partition per task (2 tasks x 4)
    assert len({(b, p, o) for b, p, o, _ in written}) <= 2 * 4


def _export(driver: ClusterDriver, *argv: str) -> int:
    """``zkconsumer export ARGV --master spark://...`` through the CLI's own entry point."""
    out = driver.run(f"""
from zkconsumer import cli
assert cli.main(["export", *{list(argv)!r}, "--master", spark.sparkContext.master]) == 0
""")
    match = re.search(r"exported (\d+) rows", out)
    assert match, out
    return int(match.group(1))


def _parquet_rows(out: Path) -> list[Row]:
    return sorted((r["topic"], r["broker_id"], r["partition"], r["offset"], r["next_offset"],
                   r["value"]) for r in pq.read_table(str(out)).to_pylist())


def test_cluster_export_to_file_uri_resumes_and_exports_a_log_dir(
        driver: ClusterDriver, produced_cluster: ProducedCluster, tmp_path: Path) -> None:
    out = tmp_path / "out"
    zk = produced_cluster.zk_connect
    first = produced_cluster.rows()
    assert _export(driver, "--zk", zk, "--topic", "events", "--to", out.as_uri()) == len(first)
    fill(produced_cluster, 1, tag="second-")
    everything = produced_cluster.rows()
    assert _export(driver, "--zk", zk, "--topic", "events", "--to", out.as_uri(),
                   "--from", "previous") == len(everything) - len(first)
    assert _parquet_rows(out) == everything

    logs = tmp_path / "logs"  # the same path on every executor: one machine
    sets = {"orders-0": [encode_message_set([b"o%d" % i for i in range(50)]),
                         encode_message_set([b"z%d" % i for i in range(20)],
                                            compression=Compression.GZIP)],
            "orders-1": [encode_message_set([b"s%d" % i for i in range(30)],
                                            compression=Compression.SNAPPY)]}
    expected: list[Row] = []
    for name, datas in sets.items():
        (logs / name).mkdir(parents=True)
        start = 0
        for data in datas:
            (logs / name / segment_name(start)).write_bytes(data)
            expected += [("orders", None, int(name[-1]), o, n, v)
                         for o, n, v in decode_message_set(data, start).messages]
            start += len(data)
    out2 = tmp_path / "from-logs"
    assert _export(driver, "--log-dir", str(logs), "--to", out2.as_uri()) == len(expected)
    assert _parquet_rows(out2) == sorted(expected)
