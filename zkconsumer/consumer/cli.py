"""``zkconsumer group``: list groups, describe one (members, owners, offsets, lag), verify it.

``zkconsumer group describe --zk HOST:PORT[/chroot] --group G [--json] [--verify]`` prints the
members (ids value and thread ids), then one line per partition: owner, committed offset, log
end (offsets request -1 to the broker) and lag in bytes, like 0.7's ConsumerOffsetChecker;
then the VerifyConsumerRebalance check (every partition of a subscribed topic owned by a live
thread).  A subscribed topic that no broker has registered gets a row "topic not registered"
(members wait for it; that alone does not fail ``--verify``).  With ``--verify`` the exit
status is 1 when the check fails.
``zkconsumer group list --zk ...`` prints one group per line.  A group with no znode at all
(``/consumers/G``) is an error (exit 1): it is almost always a typo, and an empty report
would look like a healthy idle group.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap

from zkconsumer.consumer.groupinfo import GroupReport, describe_group, list_groups
from zkconsumer.errors import ConfigurationError
from zkconsumer.zk.paths import group_path
from zkconsumer.zk.security_config import add_zk_security_arguments, zk_security_from
from zkconsumer.zk.session import ZkSession

HELP = "inspect consumer groups: list, describe (owners, offsets, lag), verify the rebalance"


ZK_METAVAR = "HOST:PORT[,...][/chroot]"
ZK_HELP = "ZooKeeper connect string of the 0.7 cluster, chroot included (zk.connect)"

LIST_EPILOG = """\
example:
  zkconsumer group list --zk zk1:2181,zk2:2181/kafka

exit status: 0 (also when there are no groups), 1 error (e.g. ZooKeeper unreachable)
"""

DESCRIBE_EPILOG = """\
The lag column is log end minus committed offset, in bytes (0.7 offsets are byte positions),
like 0.7's ConsumerOffsetChecker; the rebalance check is VerifyConsumerRebalance (every
partition of a subscribed topic owned by a live consumer thread) and, beyond it, that the
owner is the thread the 0.7 assignment names (a member that missed a change keeps partitions
the group gave to another).  A subscribed topic that
no broker has registered yet shows as one row "topic not registered" (a typo in a member's
--topic, or a topic nobody produced to yet); members wait for it, so --verify still passes.

examples:
  zkconsumer group describe --zk zk1:2181/kafka --group billing
  zkconsumer group describe --zk zk1:2181/kafka --group billing --verify --no-log-end
  zkconsumer group describe --zk zk1:2181/kafka --group billing --json | jq .partitions

exit status: 0 report printed, 1 error (no such group, ZooKeeper unreachable) or, with
--verify, the rebalance check failed
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("examples:\n  zkconsumer group list --zk zk1:2181/kafka\n"
                     "  zkconsumer group describe --zk zk1:2181/kafka --group billing --verify")
    sub = parser.add_subparsers(dest="group_command", metavar="SUBCOMMAND", required=True)
    lst = sub.add_parser("list", help="list the consumer groups in ZooKeeper",
                         description=textwrap.fill(
                             "List the consumer groups in ZooKeeper (/consumers), one per line."),
                         epilog=LIST_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    lst.add_argument("--zk", required=True, metavar=ZK_METAVAR, help=ZK_HELP)
    desc = sub.add_parser("describe", help="members, owners, offsets and lag of one group",
                          description=textwrap.fill(
                              "Members (with their subscriptions), then per partition the "
                              "committed offset, log end, lag and owning thread, then the "
                              "rebalance check."),
                          epilog=DESCRIBE_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    desc.add_argument("--zk", required=True, metavar=ZK_METAVAR, help=ZK_HELP)
    desc.add_argument("--group", required=True, metavar="GROUP",
                      help="the consumer group (groupid)")
    desc.add_argument("--json", action="store_true", help="print the report as JSON")
    desc.add_argument("--verify", action="store_true",
                      help="exit 1 if a partition has no owner or an owner that is not live")
    desc.add_argument("--no-log-end", action="store_true",
                      help="do not ask the brokers for the log end (no lag column)")
    for p in (lst, desc):
        add_zk_security_arguments(p)


def _print_report(report: GroupReport) -> None:
    out = sys.stdout
    out.write(f"group {report.group}: {len(report.members)} member(s)\n")
    for m in report.members:
        if m.error:
            out.write(f"  {m.consumer_id}  UNREADABLE: {m.error}\n")
            continue
        threads = "; ".join(f"{t}: {', '.join(ids)}" for t, ids in sorted(m.threads.items()))
        out.write(f"  {m.consumer_id}  {m.registration}  [{threads}]\n")
    out.write(f"{'topic':<24} {'partition':<10} {'offset':>14} {'log end':>14} {'lag':>12}  "
              "owner\n")
    for p in report.partitions:
        owner = p.owner or "-"
        if p.owner is not None and not p.owner_live:
            owner += " (NOT LIVE)"
        out.write(f"{p.topic:<24} {p.partition:<10} {_n(p.offset):>14} {_n(p.log_end):>14} "
                  f"{_n(p.lag):>12}  {owner}\n")
    for topic in report.unregistered_topics:  # subscribed, but no broker has it (yet)
        out.write(f"{topic:<24} {'-':<10} {'-':>14} {'-':>14} {'-':>12}  topic not registered\n")
    if report.ok and not report.members:
        out.write("rebalance check: no live members (nothing is owned; offsets above are "
                  "where the next member starts)\n")
    elif report.ok:
        out.write("rebalance check: OK (every partition owned by the live thread the "
                  "assignment names)\n")
    else:
        out.write(f"rebalance check: FAILED ({len(report.problems)} problem(s))\n")
        for problem in report.problems:
            out.write(f"  {problem}\n")


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)


def main(args: argparse.Namespace) -> int:
    with ZkSession(args.zk, security=zk_security_from(args)) as session:
        if args.group_command == "list":
            for group in list_groups(session):
                print(group)
            return 0
        if not session.exists(group_path(args.group)):
            raise ConfigurationError(f"no consumer group {args.group!r} in ZooKeeper at "
                                     f"{args.zk} (no {group_path(args.group)}; "
                                     "`zkconsumer group list` shows the groups)")
        report = describe_group(session, args.group, log_end=not args.no_log_end)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        _print_report(report)
    return 1 if args.verify and not report.ok else 0
