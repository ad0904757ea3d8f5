"""Secured ZooKeeper ensembles for the security tests, started by the product's own code.

Every server is a real Debian ZooKeeper 3.8 started by `zkconsumer.devcluster.zookeeper`
(the code behind ``zkconsumer dev-cluster --zk-tls/--zk-sasl``), once per test session and
only when a test asks for it:

* ``mixed`` -- the production shape: a plain ``clientPort`` for the 0.7 brokers and Scala
  members, and a TLS ``secureClientPort`` (client certificates required) for zkconsumer;
* ``tls`` -- TLS only, client-certificate authentication;
* ``sasl`` -- SASL DIGEST-MD5 required from every client (``sessionRequireClientSASLAuth``),
  users ``alice`` and ``bob``;
* ``digest`` -- a plain server whose per-test chroot carries a digest ACL: only
  ``digest:alice`` may do anything under it.

`secure_env(mode)` gives a `SecureEnv` per test: a fresh chroot on that server, the connect
strings and settings for zkconsumer and for the brokers, the CLI flags, and the secrets the
test must never find in a log.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.security import make_acl
from security_helpers import ALICE_PASSWORD, BOB_PASSWORD, SecureEnv

from zkconsumer.devcluster.zksecure import ServerSecurity
from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.zk.security import ZkSecurity
from zkconsumer.zk.session import ZkSession


def _digest_id(user: str, password: str) -> str:
    raw = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(raw).decode()}"


@pytest.fixture(scope="session")
def secure_servers(tmp_path_factory: pytest.TempPathFactory
                   ) -> Iterator[Callable[[str], ZooKeeperServer]]:
    started: dict[str, ZooKeeperServer] = {}
    users = {"alice": ALICE_PASSWORD, "bob": BOB_PASSWORD}

    def get(mode: str) -> ZooKeeperServer:
        if mode not in started:
            security = {
                "mixed": ServerSecurity(tls=True, plain=True),
                "tls": ServerSecurity(tls=True, plain=False),
                "sasl": ServerSecurity(sasl_users=users, require_sasl=True),
                "digest": ServerSecurity(),
            }[mode]
            server = ZooKeeperServer(tmp_path_factory.mktemp(f"zk-{mode}"), security=security)
            started[mode] = server.start()
        return started[mode]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture
def secure_env(secure_servers: Callable[[str], ZooKeeperServer], tmp_path: Path
               ) -> Iterator[Callable[[str], SecureEnv]]:
    """``secure_env(mode)``: a fresh chroot on the ``mode`` server; removed afterwards."""
    made: list[tuple[SecureEnv, ZkSecurity]] = []

    def make(mode: str) -> SecureEnv:
        server = secure_servers(mode)
        chroot = f"/zkc-sec-{uuid.uuid4().hex[:12]}"
        client = server.client_security
        password_file = None
        secrets = [ALICE_PASSWORD, BOB_PASSWORD]
        if mode in ("sasl", "digest"):
            password_file = tmp_path / "alice.password"
            password_file.write_text(ALICE_PASSWORD + "\n")
        if mode == "sasl":
            client = ZkSecurity(sasl_user="alice", password_file=str(password_file))
        elif mode == "digest":
            client = ZkSecurity(digest_user="alice", password_file=str(password_file))
        root = server.connect_string
        admin = client
        with ZkSession(root if mode != "mixed" else server.secure_connect_string,
                       security=admin) as s:
            if mode == "digest":
                acl = [make_acl("digest", _digest_id("alice", ALICE_PASSWORD), all=True)]
                s.client.create(chroot, None, acl=acl)
            else:
                s.ensure_persistent(chroot)
        if mode == "mixed":
            env = SecureEnv(mode, server, chroot, server.secure_connect_string + chroot,
                            client, root + chroot, ZkSecurity(), root + chroot,
                            password_file, secrets)
        else:
            env = SecureEnv(mode, server, chroot, root + chroot, client, root + chroot, client,
                            None if mode == "tls" else root + chroot, password_file, secrets)
        secrets.extend(_private_keys(env.security))
        made.append((env, admin))
        return env

    yield make
    for env, admin in made:
        root = env.zk[: env.zk.rfind("/")]
        with ZkSession(root, security=admin) as s:
            s.delete_recursive(env.chroot)


def _private_keys(security: ZkSecurity) -> list[str]:
    """The base64 body lines of the client key: also secrets no log may show."""
    if not security.tls_key:
        return []
    lines = Path(security.tls_key).read_text().splitlines()
    return [line for line in lines if line and not line.startswith("-----")][:3]


def with_security(env: SecureEnv, **changes: object) -> ZkSecurity:
    return dataclasses.replace(env.security, **changes)  # type: ignore[arg-type]
