"""``zkconsumer mirror translate [--reverse]``: the command line of both directions.

    zkconsumer mirror translate --zk ZK --group G07 --mirror-group M --to kafka://H:P
                                --target-group G [--topic-map ...] [--topic T ...]
                                [--reverse] [--apply] [--force]

Forward (`zkconsumer.mirror.translate`): G07's 0.7 offsets -> G's offsets on the target.
``--reverse`` (`zkconsumer.mirror.translate_reverse`): G's target offsets -> G07's 0.7
offsets, the rollback.  Both print the plan (stdout), the notes and refusals (stderr), and
write only with ``--apply``.  Exit status: 0 plan printed (applied with --apply), 1 refused or
an error, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from zkconsumer.errors import ConfigurationError
from zkconsumer.extras import require
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from

__all__ = ["EPILOG", "add_parser", "main"]

EPILOG = """\
Refuses (exit 1, nothing written) while the 0.7 group has live members (--force overrides)
and when the mirror has not copied a partition up to the group's committed offset.  Needs the
provenance headers of an exactly-once mirror.  Playbook: docs/migration.md.

--reverse rolls the target group back: it maps G's committed target offsets to 0.7 byte
offsets and (with --apply) writes them as G07's offsets by compare-and-set.  Where G stopped
inside a compressed 0.7 set, G07 resumes at the set's start: the plan's "again" column says
how many messages G07 gets a second time (nothing is skipped).  Refuses while G07 or G has
live members (--force overrides) and when a target offset cannot be mapped.

examples:
  zkconsumer mirror translate --zk zk1:2181/kafka07 --group billing --mirror-group m \\
      --to kafka://kafka1:9092 --target-group billing --apply
  zkconsumer mirror translate --reverse --zk zk1:2181/kafka07 --group billing \\
      --mirror-group m --to kafka://kafka1:9092 --target-group billing --apply

exit status: 0 plan printed (and applied with --apply), 1 refused or an error, 2 usage
"""


def add_parser(sub: Any) -> None:
    """Add ``translate`` to the ``mirror`` subcommands."""
    p = sub.add_parser(
        "translate", help="move a 0.7 group's offsets onto the target, or back (--reverse)",
        description="Compute, for every target partition the mirrored topics landed in, the "
                    "offset from which a modern consumer sees exactly what the 0.7 group had "
                    "not consumed; print the plan; with --apply commit it for --target-group. "
                    "--reverse computes the way back: the 0.7 offsets from which the 0.7 group "
                    "gets what the target group had not consumed.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--zk", metavar="HOST:PORT[,...][/chroot]", required=True,
                   help="ZooKeeper connect string of the source 0.7 cluster, chroot included "
                        "(zk.connect)")
    p.add_argument("--group", metavar="G07", required=True, help="the 0.7 consumer group")
    p.add_argument("--mirror-group", metavar="M",
                   help="the mirror's group, whose checkpoints say what was copied (required "
                        "without --reverse)")
    p.add_argument("--to", dest="to", metavar="kafka://HOST:PORT", required=True,
                   help="the target cluster")
    p.add_argument("--target-group", metavar="G", required=True,
                   help="the consumer group on the target")
    p.add_argument("--topic-map", metavar="OLD:NEW,...", help="the mirror's --topic-map")
    p.add_argument("--topic", action="append", default=[], metavar="TOPIC",
                   help="only these 0.7 topics (default: all the 0.7 group committed)")
    p.add_argument("--checkpoint-topic", default="__zkconsumer_mirror_checkpoints",
                   metavar="T", help="the mirror's mirror.checkpoint.topic (default "
                                     "%(default)s)")
    p.add_argument("--reverse", action="store_true",
                   help="roll back: the target group's offsets become the 0.7 group's")
    add_zk_security_arguments(p)
    p.add_argument("--apply", action="store_true",
                   help="write the plan: the target group's offsets (forward) or the 0.7 "
                        "group's (--reverse); default: dry run")
    p.add_argument("--force", action="store_true",
                   help="translate although the 0.7 group (or, with --reverse, the target "
                        "group) has live members")


def main(args: argparse.Namespace) -> int:
    from zkconsumer.mirror.config import TargetSpec

    target = TargetSpec.parse(args.to)
    if target.kind != "kafka":
        raise ConfigurationError("translate needs a kafka:// target")
    require("mirror", "zkconsumer mirror translate")
    bootstrap = ",".join(target.bootstrap)
    if args.reverse:
        return _reverse(args, bootstrap)
    if not args.mirror_group:
        raise ConfigurationError("translate needs --mirror-group (the mirror's group)")
    return _forward(args, bootstrap)


def _forward(args: argparse.Namespace, bootstrap: str) -> int:
    from zkconsumer.mirror.config import parse_topic_map
    from zkconsumer.mirror.translate import apply_plan, format_plan, make_plan
    from zkconsumer.zk.session import ZkSession

    with ZkSession(args.zk, security=zk_security_from(args)) as session:
        plan = make_plan(session, args.group, args.mirror_group, bootstrap,
                         topic_map=parse_topic_map(args.topic_map),
                         topics=args.topic or None, checkpoint_topic=args.checkpoint_topic)
    print(format_plan(plan))
    if plan.written:
        print(f"note: {plan.written} target records were written on target (no provenance "
              "headers: not copied by the mirror); the rows count those the new group gets "
              "under \"written on target\" (a 0.7 group had them only through a bridge)",
              file=sys.stderr)
    refusals = [*map(str, plan.behind), *plan.refusals]
    if plan.live_members and not args.force:
        refusals.append(f"0.7 group {args.group} still has live members "
                        f"({', '.join(plan.live_members)}); stop them (or --force)")
    if _refused(refusals):
        return 1
    if args.apply:
        apply_plan(plan, bootstrap, args.target_group)
        print(f"committed for target group {args.target_group}", file=sys.stderr)
    else:
        print("dry run: --apply commits these offsets", file=sys.stderr)
    return 0


def _reverse(args: argparse.Namespace, bootstrap: str) -> int:
    from zkconsumer.mirror.config import parse_topic_map
    from zkconsumer.mirror.translate_reverse import (
        apply_reverse,
        format_reverse,
        make_reverse_plan,
    )
    from zkconsumer.zk.session import ZkSession

    with ZkSession(args.zk, security=zk_security_from(args)) as session:
        plan = make_reverse_plan(session, args.group, bootstrap, args.target_group,
                                 topic_map=parse_topic_map(args.topic_map),
                                 topics=args.topic or None)
        print(format_reverse(plan))
        for row in plan.rows:
            if row.again:
                print(f"note: {row.topic}/{row.partition} resumes at the message set at "
                      f"{row.offset}: {row.again} messages {args.target_group} had consumed "
                      "are delivered again (never skipped)", file=sys.stderr)
        if plan.written:
            print(f"note: {args.target_group} had consumed {plan.written} records written on "
                  "target (no provenance headers); they have no 0.7 offset", file=sys.stderr)
        refusals = [f"cannot map: {u}" for u in plan.unmapped]
        if not args.force:
            if plan.live_members:
                refusals.append(f"0.7 group {args.group} still has live members "
                                f"({', '.join(plan.live_members)}); stop them (or --force)")
            if plan.target_live:
                refusals.append(f"target group {args.target_group} is {plan.target_live}; "
                                "stop its consumers (or --force)")
        if _refused(refusals):
            return 1
        if not args.apply:
            print("dry run: --apply writes these offsets for the 0.7 group", file=sys.stderr)
            return 0
        failed = apply_reverse(session, plan, args.group)
    if _refused(failed):
        return 1
    print(f"written for 0.7 group {args.group}", file=sys.stderr)
    return 0


def _refused(reasons: list[str]) -> bool:
    for reason in reasons:
        print(f"refused: {reason}", file=sys.stderr)
    return bool(reasons)
