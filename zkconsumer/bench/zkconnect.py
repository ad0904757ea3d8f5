"""``zkconsumer bench zkconnect``: ZooKeeper connection set-up time, plain vs TLS vs SASL.

One dev ZooKeeper (`zkconsumer.devcluster.zookeeper`) serves a plain port and a TLS
``secureClientPort`` (client certificates required, generated CA) and knows one SASL
DIGEST-MD5 user; each case opens a `ZkSession`, does one ``exists`` round trip (so a SASL
login has completed, and the chroot check has its answer) and closes it, ``--rounds`` times
after five unmeasured ones (the server's JIT warms each path separately).
Each line is ``zkconnect <case>: median M ms, p90 P ms (N sessions); request R ms`` -- the
set-up cost a command pays once at start-up (a consumer group, a producer, ``group
describe``), then the median of 500 ``exists`` round trips on one open session of that kind.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from zkconsumer.devcluster.zksecure import ServerSecurity
from zkconsumer.devcluster.zookeeper import ZooKeeperServer
from zkconsumer.zk.security import Secret, ZkSecurity
from zkconsumer.zk.session import ZkSession

HELP = "ZooKeeper connection set-up time: plain, TLS (client certificate), SASL, TLS+SASL"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rounds", type=int, default=50,
                        help="sessions opened per case (default 50)")


def _measure(connect: str, security: ZkSecurity, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        with ZkSession(connect, security=security) as session:
            session.exists("/")
        times.append((time.perf_counter() - started) * 1000.0)
    return times


def _request_ms(connect: str, security: ZkSecurity, n: int = 500) -> float:
    times = []
    with ZkSession(connect, security=security) as session:
        for _ in range(n):
            started = time.perf_counter()
            session.exists("/")
            times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


def main(args: argparse.Namespace) -> int:
    password = "bench-" + str(time.time_ns())
    with tempfile.TemporaryDirectory(prefix="zkc-bench-zkconnect-") as tmp:
        server = ZooKeeperServer(tmp, security=ServerSecurity(
            tls=True, sasl_users={"bench": password}))
        with server:
            tls = server.client_security
            sasl = ZkSecurity(sasl_user="bench", password=Secret(password))
            cases = [("plain", server.connect_string, ZkSecurity()),
                     ("TLS", server.secure_connect_string, tls),
                     ("SASL", server.connect_string, sasl),
                     ("TLS+SASL", server.secure_connect_string, ZkSecurity(
                         tls_ca=tls.tls_ca, tls_cert=tls.tls_cert, tls_key=tls.tls_key,
                         sasl_user="bench", password=Secret(password)))]
            for name, connect, security in cases:
                _measure(connect, security, 5)  # warm this path of the server's JIT first
                times = sorted(_measure(connect, security, args.rounds))
                p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
                print(f"zkconnect {name}: median {statistics.median(times):.1f} ms, "
                      f"p90 {p90:.1f} ms ({len(times)} sessions); request "
                      f"{_request_ms(connect, security):.2f} ms", flush=True)
    return 0
