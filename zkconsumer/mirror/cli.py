"""``zkconsumer mirror``: copy 0.7 topics into a modern Kafka cluster (or another 0.7 cluster).

    zkconsumer mirror --zk ZK --group G (--topic T ... | --whitelist RE | --blacklist RE)
                      --to kafka://HOST:PORT[,HOST:PORT] | --to kafka07://ZK[/chroot]
                      [--topic-map old:new,...] [--partitioning preserve|hash|round-robin]
                      [--key-regex RE] [--create-topics --partitions N --replication-factor R]
                      [--config consumer.properties] [--set k=v ...] [--metrics-port P]
                      [--progress]
    zkconsumer mirror --from kafka://HOST:PORT[,...] --group G --topic T ...
                      --to kafka07://ZK[/chroot] [--topic-map ...] [--partitioning ...]
    zkconsumer mirror verify --zk ZK --group G --to URL [--topic-map ...] [--topic T ...]
                      [--method read|offsets] [--payloads] [--allow-duplicates]
                      [--include-direct-writes]

Settings merge in this order, later winning: ``--config`` file, ``--set`` flags, dedicated
flags.  Keys split by prefix (see `zkconsumer.mirror.config`): 0.7 consumer properties,
``mirror.*``, ``target.*``.  SIGTERM / SIGINT stop the mirror cleanly: stop consuming, wait
for in-flight acks (``mirror.shutdown.timeout.ms``), commit, close.  Exit status: 0 after a
clean stop, 1 on a fatal error; ``verify`` exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from zkconsumer.consumer.joining import STARTUP_TIMEOUT_HELP
from zkconsumer.errors import ConfigurationError
from zkconsumer.properties import load_properties, parse_settings
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from

HELP = "mirror 0.7 topics into modern Kafka (kafka://) or another 0.7 cluster (kafka07://)"

log = logging.getLogger(__name__)


def _add_source_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zk", metavar="HOST:PORT[,...][/chroot]",
                   help="ZooKeeper connect string of the source 0.7 cluster, chroot included "
                        "(zk.connect)")
    p.add_argument("--group", metavar="GROUP", help="source consumer group (groupid)")
    p.add_argument("--to", dest="to", metavar="URL",
                   help="target: kafka://HOST:PORT[,HOST:PORT] or kafka07://ZK[/chroot]")
    p.add_argument("--topic-map", metavar="OLD:NEW,...", help="rename topics on the target")
    p.add_argument("--config", metavar="FILE",
                   help="properties file: 0.7 consumer keys, mirror.* and target.* keys")
    p.add_argument("--set", dest="set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one property (repeatable)")
    add_zk_security_arguments(p)  # the source's; a kafka07:// target's: target.zk.* keys


EPILOG = """\
Settings, later wins: --config file (0.7 consumer keys, mirror.* and target.* keys), then
--set, then the flags.  SIGTERM / Ctrl-C stop cleanly (wait for in-flight acks, commit).  An
unreachable target is retried until it is back (offsets do not move, /healthz is 503).
Properties and guarantees: docs/mirror.md.

examples:
  zkconsumer mirror --zk zk1:2181/kafka07 --group mirror-to-new --whitelist 'events\\..*' \\
      --to kafka://kafka1:9092,kafka2:9092 --metrics-port 9310 --progress
  zkconsumer mirror --zk zk1:2181/kafka07 --group m --topic orders:2 --to kafka07://zk9:2181/new
  zkconsumer mirror --from kafka://kafka1:9092 --group bridge --topic orders \
      --to kafka07://zk1:2181/kafka07 --partitioning hash   # the bridge, modern -> 0.7
  zkconsumer mirror verify --zk zk1:2181/kafka07 --group mirror-to-new --to kafka://kafka1:9092

exit status: 0 stopped cleanly by a signal, 1 fatal error (bad setting, missing target topic
without --create-topics, a source message that cannot be handed out), 2 usage
"""

VERIFY_EPILOG = """\
Counts each source partition from its earliest retained offset up to the group's committed
offset, and the target topics (after --topic-map).  Run it after the mirror stopped cleanly.
Status per row: OK, MISSING (target has fewer), EXTRA (target has more, e.g. replays).

example:
  zkconsumer mirror verify --zk zk1:2181/kafka07 --group mirror-to-new \\
      --to kafka://kafka1:9092 --payloads

exit status: 0 every row OK, 1 a row is not OK (EXTRA allowed with --allow-duplicates), the
group has no committed offsets, or an error; 2 usage
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    _add_source_flags(parser)
    sel = parser.add_mutually_exclusive_group()
    sel.add_argument("--topic", action="append", default=[], metavar="TOPIC[:STREAMS]",
                     help="source topic (repeatable)")
    sel.add_argument("--whitelist", metavar="RE", help="mirror topics matching this regex")
    sel.add_argument("--blacklist", metavar="RE", help="mirror topics not matching this regex")
    parser.add_argument("--streams", "--num-streams", dest="num_streams", type=int, default=1,
                        metavar="N",
                        help="streams (thread ids) per topic this member registers, when not "
                             "given as TOPIC:STREAMS (default 1; --num-streams is the old "
                             "name)")
    parser.add_argument("--partitioning", default="preserve",
                        choices=["preserve", "hash", "round-robin"],
                        help="target partition choice (default preserve: source partition i "
                             "of the numerically sorted B-P list -> target i %% n)")
    parser.add_argument("--key-regex", metavar="RE",
                        help="with --partitioning hash: group 1 of this regex on the payload is "
                             "the message key")
    parser.add_argument("--create-topics", action="store_true",
                        help="create missing target topics (kafka:// only; needs --partitions)")
    parser.add_argument("--partitions", type=int, metavar="N",
                        help="partitions of created topics")
    parser.add_argument("--replication-factor", type=int, default=1, metavar="R",
                        help="replication factor of created topics (default 1)")
    parser.add_argument("--metrics-port", type=int, metavar="P",
                        help="serve Prometheus /metrics and /healthz on this port (0 = any; "
                             "default off)")
    parser.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDR",
                        help="address for --metrics-port (default 127.0.0.1)")
    parser.add_argument("--progress", action="store_true",
                        help="print a progress line on stderr")
    parser.add_argument("--startup-timeout", type=float, metavar="S",
                        help=STARTUP_TIMEOUT_HELP)
    parser.add_argument("--at-least-once", action="store_true",
                        help="kafka:// target without transactions: commit after in-order "
                             "acks (duplicates after a crash); default is exactly-once")
    parser.add_argument("--from", dest="from_url", metavar="kafka://HOST:PORT[,...]",
                        help="the bridge: read this modern cluster (as consumer group --group, "
                             "read_committed) and write into the 0.7 cluster of --to "
                             "kafka07://ZK; default: the source is the 0.7 cluster at --zk")
    sub = parser.add_subparsers(dest="mirror_command", metavar="[verify|translate]")
    verify = sub.add_parser("verify", help="compare mirrored message counts, source vs target",
                            description="Count the source range the group committed and the "
                                        "target topics; print a table; exit 1 on mismatch.",
                            epilog=VERIFY_EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_source_flags(verify)
    verify.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                        help="only these source topics (default: every topic the group "
                             "committed)")
    verify.add_argument("--method", choices=["read", "offsets"], default="read",
                        help="kafka:// target: count by reading (default) or by offsets")
    verify.add_argument("--payloads", action="store_true",
                        help="also compare payload digests (finds a loss hidden by a duplicate)")
    verify.add_argument("--allow-duplicates", action="store_true",
                        help="EXTRA (target has more, e.g. replays after a crash) is not a "
                             "failure")
    verify.add_argument("--include-direct-writes", action="store_true",
                        help="kafka:// target: also count records written on the target "
                             "directly (no provenance headers; default: mirrored records "
                             "only, the others are named on stderr)")
    from zkconsumer.mirror import translate_cli

    translate_cli.add_parser(sub)


def _load_props(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = {}
    if args.config:
        try:
            props.update(load_properties(args.config))
        except OSError as exc:
            raise ConfigurationError(f"--config {args.config}: {exc}") from exc
    props.update(parse_settings(args.set))
    if args.zk:
        props["zk.connect"] = args.zk
    if args.group:
        props["groupid"] = args.group
    return props


def _target(args: argparse.Namespace) -> Any:
    from zkconsumer.mirror.config import TargetSpec

    if not args.to:
        raise ConfigurationError("--to is required (kafka://HOST:PORT or kafka07://ZK)")
    return TargetSpec.parse(args.to)


def _subscription(args: argparse.Namespace) -> Any:
    from zkconsumer.consumer.subscription import Subscription

    if args.topic:
        topics: dict[str, int] = {}
        for arg in args.topic:
            name, sep, n = arg.rpartition(":")
            if not sep:
                name, n = arg, str(args.num_streams)
            try:
                topics[name] = int(n)
            except ValueError as exc:
                raise ConfigurationError(f"--topic {arg!r}: expected TOPIC[:STREAMS]") from exc
        return Subscription(topics=topics)
    if args.whitelist or args.blacklist:
        return Subscription(whitelist=args.whitelist, blacklist=args.blacklist,
                            num_streams=args.num_streams)
    raise ConfigurationError("give --topic T (repeatable), --whitelist RE or --blacklist RE")


def main(args: argparse.Namespace) -> int:
    # librdkafka reports every refused connection; the mirror logs what matters itself.
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("zkconsumer.mirror.librdkafka").setLevel(logging.CRITICAL)
    if getattr(args, "mirror_command", None) == "verify":
        return _verify(args)
    if getattr(args, "mirror_command", None) == "translate":
        from zkconsumer.mirror import translate_cli

        return translate_cli.main(args)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from zkconsumer.consumer.config import ConsumerConfig
    from zkconsumer.mirror.config import MirrorConfig, parse_topic_map, split_properties
    from zkconsumer.mirror.runner import build_mirror, describe_mode, telemetry
    from zkconsumer.mirror.serve import serve

    if args.from_url:
        from zkconsumer.mirror.bridge_cli import run_bridge

        return run_bridge(args, _load_props(args))
    consumer_props, mirror_props, target_props = split_properties(_load_props(args))
    target = _target(args)
    config = MirrorConfig.from_properties(
        target, mirror_props, target_props,
        topic_map=parse_topic_map(args.topic_map), partitioning=args.partitioning,
        key_regex=args.key_regex, create_topics=args.create_topics,
        partitions=args.partitions, replication_factor=args.replication_factor,
        metrics_port=args.metrics_port, progress=args.progress,
        exactly_once=not args.at_least_once, startup_timeout=args.startup_timeout)
    consumer_config = ConsumerConfig.from_properties(
        consumer_props, zk_security=zk_security_from(args, consumer_props))
    subscription = _subscription(args)

    mirror = build_mirror(config, consumer_config, subscription)
    mode = (f"mirroring {subscription} of group {consumer_config.group_id} -> {target} "
            f"({config.partitioning.value} partitioning), {describe_mode(config)}")
    return serve(mirror, config, telemetry(mirror), mode=mode, metrics_host=args.metrics_host,
                 show_progress=args.progress)


def _verify(args: argparse.Namespace) -> int:
    from zkconsumer.mirror.config import parse_topic_map, split_properties
    from zkconsumer.mirror.verify import (
        compare,
        direct_notes,
        format_table,
        kafka07_counts,
        kafka_counts,
        source_counts,
    )
    from zkconsumer.zk.session import ZkSession

    consumer_props, _mirror, target_props = split_properties(_load_props(args))
    zk = consumer_props.get("zk.connect")
    group = consumer_props.get("groupid")
    if not zk or not group:
        raise ConfigurationError("verify needs --zk and --group (or zk.connect/groupid in "
                                 "--config)")
    target = _target(args)
    topic_map = parse_topic_map(args.topic_map)
    with ZkSession(zk, security=zk_security_from(args, consumer_props)) as session:
        source = source_counts(session, group, topics=args.topic or None,
                               payloads=args.payloads)
    targets = sorted({topic_map.get(t, t) for t in source})
    if target.kind == "kafka":
        counted = kafka_counts(list(target.bootstrap), targets, method=args.method,
                               payloads=args.payloads,
                               include_direct=args.include_direct_writes)
    else:
        counted = kafka07_counts(target.zk_connect, targets, payloads=args.payloads,
                                 security=zk_security_from(None, target_props))
    rows = compare(source, counted, topic_map)
    print(format_table(rows))
    for note in direct_notes(counted):
        print(f"note: {note}", file=sys.stderr)
    bad = [r for r in rows if r.status != "OK"
           and not (r.status == "EXTRA" and args.allow_duplicates)]
    if not rows:
        print(f"group {group} has no committed offsets: nothing was mirrored yet",
              file=sys.stderr)
        return 1
    return 1 if bad else 0
