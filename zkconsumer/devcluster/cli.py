"""``zkconsumer dev-cluster``: run ZooKeeper plus N dev brokers in the foreground.

Prints two lines once everything is up (machine-readable, one ``key: value`` each)::

    zookeeper: 127.0.0.1:2181
    brokers: 0:127.0.0.1:9092,1:127.0.0.1:9093

With ``--zk-tls`` / ``--zk-sasl`` (a secured ZooKeeper, certificates and the SASL password
generated into ``--dir``) two more lines follow: ``zookeeper-tls: HOST:PORT`` (TLS only) and
``zk-client-flags: ...`` -- the flags any command needs to connect there.

then waits; Ctrl-C or SIGTERM stops the brokers cleanly (flush, deregister) and then
ZooKeeper.  The brokers use dev settings (flush after every message and every 100 ms, 64 MiB
segments) unless ``--flush-interval`` / ``--flush-ms`` / ``--log-file-size`` say otherwise.
"""

from __future__ import annotations

import argparse
import secrets
import shlex
import signal
import threading

from zkconsumer.broker.config import parse_topic_map
from zkconsumer.devcluster.cluster import DevCluster
from zkconsumer.devcluster.zksecure import ServerSecurity
from zkconsumer.zk.security_config import zk_security_flags

HELP = "run a local ZooKeeper and N Kafka 0.7 dev brokers (prints the connect string)"


EPILOG = """\
Once up it prints two lines on stdout and runs until SIGTERM / Ctrl-C:
  zookeeper: 127.0.0.1:41234
  brokers: 0:127.0.0.1:40001,1:127.0.0.1:40002
Needs a ZooKeeper installation (Debian's zookeeper package).  The brokers flush every message
at once (dev settings, not 0.7's); see docs/dev-broker.md.

examples:
  zkconsumer dev-cluster --brokers 2 --dir /tmp/zkc
  zkconsumer dev-cluster --brokers 3 --dir /tmp/zkc --zk-port 2181 --base-port 9092 \\
      --num-partitions 4 --chroot /kafka
  zkconsumer dev-cluster --dir /tmp/zkc --zk-tls --zk-sasl   # then: zkconsumer group list \\
      --zk <zookeeper-tls> <zk-client-flags>   (docs/operations.md, Security)

exit status: 0 stopped by a signal, 1 error (port in use, unwritable --dir, ...), 2 usage
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--brokers", type=int, default=2, metavar="N",
                        help="number of brokers, ids 0..N-1 (default 2)")
    parser.add_argument("--dir", required=True, metavar="DIR",
                        help="base directory for ZooKeeper data, broker logs and log files")
    parser.add_argument("--zk-port", type=int, default=0, metavar="P",
                        help="ZooKeeper client port (default: any free port)")
    parser.add_argument("--base-port", type=int, default=0, metavar="P",
                        help="broker i listens on P+i (default: any free ports)")
    parser.add_argument("--host", default="127.0.0.1", metavar="H",
                        help="host the brokers advertise and bind (default 127.0.0.1)")
    parser.add_argument("--chroot", default="", metavar="/PATH",
                        help="ZooKeeper chroot for the cluster (default: none)")
    parser.add_argument("--num-partitions", type=int, default=1, metavar="K",
                        help="num.partitions of every broker (default 1)")
    parser.add_argument("--topic-partitions", default="", metavar="T1:N,T2:M",
                        help="topic.partition.count.map of every broker")
    parser.add_argument("--flush-interval", type=int, default=1, metavar="N",
                        help="log.flush.interval (default 1: every message visible at once)")
    parser.add_argument("--flush-ms", type=int, default=100, metavar="MS",
                        help="log.default.flush.interval.ms (default 100)")
    parser.add_argument("--log-file-size", type=int, default=64 * 1024 * 1024,
                        metavar="BYTES", help="log.file.size (default 67108864)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the brokers as threads of this process, not subprocesses")
    parser.add_argument("--zk-tls", action="store_true",
                        help="ZooKeeper also serves TLS on a secureClientPort, client "
                             "certificates required (CA and certificates generated into --dir; "
                             "default: plain only)")
    parser.add_argument("--zk-sasl", action="store_true",
                        help="ZooKeeper requires SASL DIGEST-MD5 from every client (user "
                             "'zkconsumer', password generated into --dir; default: off)")


def main(args: argparse.Namespace) -> int:
    ports = ([args.base_port + i for i in range(args.brokers)] if args.base_port else None)
    cluster = DevCluster(
        args.dir, brokers=args.brokers, zk_port=args.zk_port, broker_ports=ports,
        num_partitions=args.num_partitions,
        topic_partitions=parse_topic_map(args.topic_partitions, "--topic-partitions"),
        chroot=args.chroot, in_process=args.in_process, host=args.host, bind=args.host,
        zk_security=ServerSecurity(
            tls=args.zk_tls, require_sasl=args.zk_sasl,
            sasl_users={"zkconsumer": secrets.token_urlsafe(18)} if args.zk_sasl else {}),
        flush_interval=args.flush_interval, flush_interval_ms=args.flush_ms,
        flush_scheduler_interval_ms=args.flush_ms, log_file_size=args.log_file_size)
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        cluster.start()
        try:
            print(f"zookeeper: {cluster.zk_connect}", flush=True)
            print(f"brokers: {cluster.broker_list}", flush=True)
            if cluster.zk_secure_connect:
                print(f"zookeeper-tls: {cluster.zk_secure_connect}", flush=True)
            if args.zk_tls or args.zk_sasl:
                flags = shlex.join(zk_security_flags(cluster.client_security))
                print(f"zk-client-flags: {flags}", flush=True)
            while not stop.wait(0.5):
                pass
        finally:
            cluster.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
