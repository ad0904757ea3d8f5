"""``zk.acl=creator``: what we create is ours to change and everyone's to read.

A ``run`` member and a dev broker authenticate with digest (alice) and create with the
creator ACL on the plain test ZooKeeper.  Their znodes carry creator-all + world-read; the
shared containers stay open; an anonymous client reads them (``group describe`` works) but
cannot write or delete them, nor can bob; ``offsets import`` as bob fails in one line naming
the znode and the identity.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fixtures.waiting import wait_until
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions
from security_helpers import (
    ALICE_PASSWORD,
    BOB_PASSWORD,
    Cli,
    assert_no_secret,
    env_with_repo,
    jsonl_values,
    one_line_error,
)

from zkconsumer.zk.paths import broker_id_path, consumer_ids_path, offsets_topic_path
from zkconsumer.zk.security import Secret, ZkAcl, ZkSecurity

pytestmark = pytest.mark.slow


def _acl(zk: KazooClient, path: str) -> set[tuple[str, str, int]]:
    acls, _ = zk.get_acls(path)
    return {(a.id.scheme, a.id.id.split(":")[0], a.perms) for a in acls}


CREATOR = {("digest", "alice", Permissions.ALL), ("world", "anyone", Permissions.READ)}
OPEN = {("world", "anyone", Permissions.ALL)}


def _page(url: str) -> str:
    """The body, also of a 503 (an unhealthy /healthz still must not leak)."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return str(response.read().decode())
    except urllib.error.HTTPError as exc:
        return str(exc.read().decode())


def test_creator_acl_protects_our_znodes(zk_connect: str, zk_client: KazooClient,
                                         dev_broker: Any, tmp_path: Path) -> None:
    alice = ZkSecurity(digest_user="alice", password=Secret(ALICE_PASSWORD), acl=ZkAcl.CREATOR)
    dev_broker(num_partitions=2, zk_security=alice)
    assert _acl(zk_client, broker_id_path(0)) == CREATOR
    assert _acl(zk_client, "/brokers") == OPEN and _acl(zk_client, "/brokers/ids") == OPEN

    cli = Cli(tmp_path)
    sent = [f"v{i}" for i in range(30)]
    as_alice = env_with_repo(ZKCONSUMER_ZK_PASSWORD=ALICE_PASSWORD)
    flags = ["--zk-digest-user", "alice", "--zk-acl", "creator"]
    done = cli.run("produce", ["produce", "--zk", zk_connect, "--topic", "t", *flags],
                   stdin="\n".join(sent) + "\n", env=as_alice)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out.jsonl"
    member = cli.start("member", ["run", "--zk", zk_connect, "--group", "g", "--topic", "t",
                                  "--output", str(out), "--format", "jsonl",
                                  "--set", "autocommit.interval.ms=200", "--metrics-port", "0",
                                  *flags], env=as_alice)
    try:
        wait_until(lambda: sorted(jsonl_values(out)) == sorted(sent), timeout=60,
                   what="every message consumed")
        ids = zk_client.get_children(consumer_ids_path("g"))
        assert len(ids) == 1
        assert _acl(zk_client, f"{consumer_ids_path('g')}/{ids[0]}") == CREATOR
        owners = "/consumers/g/owners/t"
        assert all(_acl(zk_client, f"{owners}/{p}") == CREATOR
                   for p in zk_client.get_children(owners))
        offsets = offsets_topic_path("g", "t")
        wait_until(lambda: zk_client.exists(offsets) and zk_client.get_children(offsets),
                   what="offsets committed")
        part = f"{offsets}/{zk_client.get_children(offsets)[0]}"
        assert _acl(zk_client, part) == CREATOR
        assert _acl(zk_client, "/consumers") == OPEN and _acl(zk_client, "/consumers/g") == OPEN
        # the containers below the group are ours too: deleting needs rights on the parent
        assert _acl(zk_client, consumer_ids_path("g")) == CREATOR

        # anonymous: reads everything, writes nothing
        value, _ = zk_client.get(part)
        assert int(value) >= 0
        with pytest.raises(NoAuthError):
            zk_client.set(part, b"0")
        with pytest.raises(NoAuthError):
            zk_client.delete(part)
        with pytest.raises(NoAuthError):
            zk_client.create(f"{consumer_ids_path('g')}/intruder", b"x", ephemeral=True)
        # /healthz and /metrics say nothing secret
        url = wait_until(lambda: re.search(r"metrics on (http://\S+)/metrics", member.log),
                         what="metrics server up").group(1)
        served = "".join(_page(f"{url}/{page}") for page in ("metrics", "healthz"))
        assert "zkconsumer" in served and ALICE_PASSWORD not in served
        described = cli.run("describe", ["group", "describe", "--zk", zk_connect, "--group",
                                         "g", "--json", "--no-log-end"])
        assert described.returncode == 0, described.stderr
        assert json.loads(described.stdout)
    finally:
        assert member.stop() == 0, member.log

    # bob may read but not rewrite alice's offsets: one line, the znode, the identity
    exported = tmp_path / "offsets.txt"
    done = cli.run("export", ["offsets", "export", "--zk", zk_connect, "--group", "g",
                              "--output", str(exported)])
    assert done.returncode == 0, done.stderr
    lines = exported.read_text().splitlines()
    assert any(not line.endswith(":0") for line in lines), lines
    rewritten = tmp_path / "rewritten.txt"  # everything back to 0: a change to write
    rewritten.write_text("".join(line.rsplit(":", 1)[0] + ":0\n" for line in lines))
    bob = env_with_repo(ZKCONSUMER_ZK_PASSWORD=BOB_PASSWORD)
    refused = cli.run("import-bob", ["offsets", "import", "--zk", zk_connect, str(rewritten),
                                     "--force", "--zk-digest-user", "bob"], env=bob)
    line = one_line_error(refused, "offsets")
    assert "/consumers/g/offsets/t/" in line and "NoAuth" in line and "digest:bob" in line
    assert_no_secret([ALICE_PASSWORD, BOB_PASSWORD],
                     [(str(p), p.read_text()) for p in cli.logs()]
                     + [("argv", repr(cli.argvs))])
