"""``zkconsumer mirror --from kafka://HOST:PORT[,...] --group G --topic T --to kafka07://ZK``.

The bridge's half of the ``mirror`` command (`zkconsumer.mirror.cli` dispatches here when
``--from`` is given): it builds a `SourceSpec` and a `MirrorConfig` from the same flags and
properties as the forward mirror -- ``--topic-map``, ``--partitioning``, ``--config``/``--set``
(``target.*`` = 0.7 producer properties such as ``target.compression.codec``, ``mirror.*``,
and ``source.*`` = librdkafka consumer properties of the source) -- and runs a `Bridge`
through `zkconsumer.mirror.serve.serve`, so signals, ``--progress``, ``/metrics`` and errors
look exactly like the forward direction's.
"""

from __future__ import annotations

import argparse

from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror.bridge import Bridge, SourceSpec
from zkconsumer.mirror.config import MirrorConfig, TargetSpec, parse_topic_map, split_properties

__all__ = ["build_bridge_config", "run_bridge"]

#: Forward-mirror flags that mean nothing for the bridge (refused rather than ignored).
_FORWARD_ONLY = (("create_topics", "--create-topics"), ("key_regex", "--key-regex"),
                 ("at_least_once", "--at-least-once"), ("blacklist", "--blacklist"))


def build_bridge_config(args: argparse.Namespace, props: dict[str, str]
                        ) -> tuple[MirrorConfig, SourceSpec]:
    """``(MirrorConfig, SourceSpec)`` for a bridge run; `ConfigurationError` on misuse."""
    source_url = TargetSpec.parse(args.from_url)
    if source_url.kind != "kafka":
        raise ConfigurationError(f"--from {args.from_url!r}: the bridge reads a modern "
                                 "cluster, kafka://HOST:PORT[,HOST:PORT]")
    if not args.to:
        raise ConfigurationError("--from needs --to kafka07://ZK[/chroot]")
    target = TargetSpec.parse(args.to)
    if target.kind != "kafka07":
        raise ConfigurationError(f"--from kafka://... writes into a 0.7 cluster: --to "
                                 f"kafka07://ZK[/chroot], not {args.to!r}")
    for name, flag in _FORWARD_ONLY:
        if getattr(args, name, None):
            raise ConfigurationError(f"{flag} does not apply to the bridge (--from)")
    consumer_props, mirror_props, target_props = split_properties(props)
    source_options = {k[len("source."):]: v for k, v in consumer_props.items()
                      if k.startswith("source.")}
    group = args.group or consumer_props.get("groupid")
    topics = tuple(t.partition(":")[0] for t in args.topic)
    config = MirrorConfig.from_properties(
        target, mirror_props, target_props, topic_map=parse_topic_map(args.topic_map),
        partitioning=args.partitioning, metrics_port=args.metrics_port,
        progress=args.progress, startup_timeout=getattr(args, "startup_timeout", None))
    source = SourceSpec(source_url.bootstrap, group or "", topics, args.whitelist,
                        source_options)
    return config, source


def run_bridge(args: argparse.Namespace, props: dict[str, str]) -> int:
    """Run the bridge until a signal (0) or a fatal error (raised: the CLI prints it)."""
    from zkconsumer.mirror.serve import Telemetry, serve

    config, source = build_bridge_config(args, props)
    bridge = Bridge(config, source)
    telemetry = Telemetry(owned=lambda: len(bridge.lanes), behind=bridge.lag)
    what = ", ".join(source.topics) if source.topics else f"topics matching {source.pattern}"
    mode = (f"bridging {what} of group {source.group} on kafka://{','.join(source.bootstrap)}"
            f" -> {config.target} ({config.partitioning.value} partitioning), exactly-once "
            "where the bridge is the only writer of a 0.7 partition (checkpoints in "
            "ZooKeeper), at-least-once where it is not")
    return serve(bridge, config, telemetry, mode=mode, metrics_host=args.metrics_host,
                 show_progress=args.progress)
