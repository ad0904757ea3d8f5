"""Every ZooKeeper-using command works against a secured ensemble, and no secret leaks.

For each way the harness secures ZooKeeper (see conftest: ``mixed`` plain + TLS ports,
``tls`` only with client certificates, ``sasl`` required, ``digest`` ACL on the chroot), one
test drives the real commands as subprocesses with the same security flags: dev brokers
register, ``produce`` writes, a ``run`` member consumes every message (in ``mixed`` a second,
Scala-style member on the *plain* port shares the group), ``group describe --verify`` passes,
``offsets export`` / ``import`` round-trip, ``mirror`` copies the topic to a Kafka broker
(tansu), a Spark ``export`` reads it all, and the Spark data source writes it to another topic
(the executors' producers connect with the same settings, given as options) and reads it back.  Then every log
the test produced, every argv and the ZooKeeper server log are grepped for the passwords and
the client key.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fixtures.tansu import create_topic, read_records
from fixtures.waiting import wait_until
from security_helpers import MODES, Cli, SecureEnv, assert_no_secret, env_with_repo, jsonl_values

from zkconsumer import cli as zkcli
from zkconsumer.zk.paths import consumer_ids_path, owners_topic_path
from zkconsumer.zk.registry import read_partition_names
from zkconsumer.zk.security_config import zk_security_options

pytestmark = pytest.mark.slow

N = 120


def _start_member(cli: Cli, env: SecureEnv, tmp_path: Path, name: str, zk: str,
                  flags: list[str]) -> tuple[Any, Path]:
    out = tmp_path / f"{name}.jsonl"
    proc = cli.start(name, ["run", "--zk", zk, "--group", "g", "--topic", "sec", "--output",
                            str(out), "--format", "jsonl", "--shutdown-timeout", "5",
                            "--log-level", "DEBUG", *flags])
    return proc, out


@pytest.mark.parametrize("mode", MODES)
def test_commands_work_on_a_secured_ensemble(mode: str, secure_env: Any, dev_broker: Any,
                                             tmp_path: Path, spark: Any, tansu: Any,
                                             capsys: pytest.CaptureFixture[str],
                                             caplog: pytest.LogCaptureFixture) -> None:
    # in this process: the dev brokers' sessions, kazoo's request log included
    caplog.set_level(logging.DEBUG, logger="kazoo")
    caplog.set_level(logging.DEBUG, logger="zkconsumer")
    env: SecureEnv = secure_env(mode)
    cli = Cli(tmp_path)
    dev_broker.many(2, zk=env.broker_zk, num_partitions=2, zk_security=env.broker_security)

    sent = [f"m-{i}" for i in range(N)]

    def produce(values: list[str]) -> None:
        done = cli.run("produce", ["produce", "--zk", env.zk, "--topic", "sec", *env.flags],
                       stdin="\n".join(values) + "\n")
        assert done.returncode == 0, done.stderr

    produce(sent[: N // 2])  # creates the topic: 2 brokers x 2 partitions
    members = [_start_member(cli, env, tmp_path, "member-secure", env.zk, env.flags)]
    if mode == "mixed":  # a Scala-style member: plain port, no credentials, same group
        members.append(_start_member(cli, env, tmp_path, "member-plain", env.plain_zk or "",
                                     []))
    try:
        with env.session() as s:
            def owners() -> set[str]:
                path = owners_topic_path("g", "sec")
                return {(s.get(f"{path}/{p}") or b"").decode().rsplit("-", 1)[0]
                        for p in s.get_children(path)}
            wait_until(lambda: len(s.get_children(consumer_ids_path("g"))) == len(members)
                       and len(owners() - {""}) == len(members)
                       and len(s.get_children(owners_topic_path("g", "sec")))
                       == len(read_partition_names(s, "sec")),
                       timeout=60, what="every member owns partitions")
        produce(sent[N // 2:])
        wait_until(lambda: sum(len(jsonl_values(out)) for _, out in members) >= N,
                   timeout=90, what=f"{N} messages consumed")
        got = sorted(v for _, out in members for v in jsonl_values(out))
        assert got == sorted(sent)  # nothing lost, nothing twice

        def verified() -> bool:
            return cli.run("describe", ["group", "describe", "--zk", env.zk, "--group", "g",
                                        "--verify", *env.flags]).returncode == 0
        wait_until(verified, timeout=60, what="group describe --verify passes", interval=0.5)
    finally:
        for proc, _ in members:
            assert proc.stop() == 0, proc.log

    exported = tmp_path / "offsets.json"
    done = cli.run("export", ["offsets", "export", "--zk", env.zk, "--group", "g",
                              "--format", "json", "--output", str(exported), *env.flags])
    assert done.returncode == 0, done.stderr
    offsets = json.loads(exported.read_text())
    assert offsets, exported.read_text()
    done = cli.run("import", ["offsets", "import", "--zk", env.zk, str(exported), "--force",
                              *env.flags])
    assert done.returncode == 0, done.stderr

    create_topic(tansu.bootstrap, "sec", 2)
    mirror = cli.start("mirror", ["mirror", "--zk", env.zk, "--group", "mg", "--topic", "sec",
                                  "--to", tansu.url, *env.flags])
    try:
        mirrored = read_records(tansu.bootstrap, "sec", N, timeout=90)
        assert sorted(r.value.decode() for rs in mirrored.values() for r in rs) == sorted(sent)
    finally:
        assert mirror.stop() == 0, mirror.log
    done = cli.run("translate", ["mirror", "translate", "--zk", env.zk, "--group", "g",
                                 "--mirror-group", "mg", "--to", tansu.url, "--target-group",
                                 "g-new", "--topic", "sec", "--apply", *env.flags])
    assert done.returncode == 0, done.stdout + done.stderr

    out = tmp_path / "parquet"
    capsys.readouterr()
    assert zkcli.main(["export", "--zk", env.zk, "--topic", "sec", "--to", str(out),
                       *env.flags]) == 0
    printed = capsys.readouterr()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted(r["value"].decode() for r in rows) == sorted(sent)
    # the data source itself, executors included (they produce): options carry paths only
    opts = zk_security_options(env.security)
    (spark.read.parquet(str(out)).select("value").write.format("kafka07").mode("append")
     .option("zookeeper.connect", env.zk).option("topic", "copy").options(**opts).save())
    copied = (spark.read.format("kafka07").option("zookeeper.connect", env.zk)
              .option("topic", "copy").options(**opts).load().collect())
    assert sorted(r["value"].decode() for r in copied) == sorted(sent)
    assert not any(secret in repr(opts) for secret in env.secrets)

    texts = [(str(p), p.read_text(errors="replace")) for p in cli.logs()]
    texts += [("argv", " ".join(" ".join(a) for a in cli.argvs)),
              ("export output", printed.out + printed.err),
              ("zookeeper log", env.server.log_tail(100000)),
              ("this process's log records", caplog.text)]
    assert_no_secret(env.secrets, texts)
    if mode in ("sasl", "digest"):  # the grep above did see kazoo's credential packets
        assert "<credentials not logged>" in caplog.text
    assert env_with_repo().get("ZKCONSUMER_ZK_PASSWORD") is None


@pytest.mark.parametrize("mode", ["tls", "sasl"])
def test_mirror_between_two_secured_07_clusters(mode: str, secure_env: Any, dev_broker: Any,
                                                tmp_path: Path) -> None:
    """A ``kafka07://`` target on a secured ensemble takes its own ``target.zk.*`` keys."""
    source, target = secure_env(mode), secure_env(mode)
    cli = Cli(tmp_path)
    dev_broker(zk=source.broker_zk, num_partitions=2, zk_security=source.broker_security)
    dev_broker(zk=target.broker_zk, num_partitions=2, zk_security=target.broker_security)
    sent = [f"x-{i}" for i in range(50)]
    done = cli.run("produce", ["produce", "--zk", source.zk, "--topic", "feed", *source.flags],
                   stdin="\n".join(sent) + "\n")
    assert done.returncode == 0, done.stderr
    target_keys = [f"--set=target.{k}={v}"
                   for k, v in zk_security_options(target.security).items()]
    mirror = cli.start("mirror", ["mirror", "--zk", source.zk, "--group", "mg", "--topic",
                                  "feed", "--to", f"kafka07://{target.zk}", *source.flags,
                                  *target_keys])
    try:
        out = tmp_path / "copy.jsonl"
        reader = cli.start("reader", ["run", "--zk", target.zk, "--group", "r", "--topic",
                                      "feed", "--output", str(out), "--format", "jsonl",
                                      *target.flags])
        try:
            wait_until(lambda: sorted(jsonl_values(out)) == sorted(sent), timeout=90,
                       what="every message mirrored to the secured 0.7 target")
        finally:
            assert reader.stop() == 0, reader.log
    finally:
        assert mirror.stop() == 0, mirror.log
    assert_no_secret(source.secrets, [(str(p), p.read_text(errors="replace"))
                                      for p in cli.logs()] + [("argv", repr(cli.argvs))])
