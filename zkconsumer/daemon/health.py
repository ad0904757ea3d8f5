"""Is a member that owns nothing a problem, or one that may be deaf?  Parts of ``/healthz``.

A member that has owned no partition for longer than ``--health-idle-timeout`` is
unhealthy only when owning nothing is wrong:

* the reference assignment (the sorted-chunk rebalance every 0.7 member computes, REFERENCE
  §2.4) gives one of its threads a partition -- it should own something (this is the case
  whenever the group has no more threads than a topic has partitions), or
* a partition of its topics has no live owner (no owner znode, or one naming a thread that
  is not registered any more) -- the group is not consuming everything.

Otherwise it is a **standby**: the group has more consumer threads than partitions, every
partition is owned, and this member takes over when another one leaves.  That is healthy.

Invariants: `idle_verdict` is pure (tested with tables); `read_idle_verdict` only reads
ZooKeeper, with the same view a rebalance uses (`read_view`); a read that fails is
reported as unhealthy ("cannot tell"), never hidden.

`Deafness` tells a member that may be missing group changes (see its docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from zkconsumer.consumer import GroupConsumer
from zkconsumer.consumer.view import GroupView, read_view
from zkconsumer.errors import ZkConsumerError
from zkconsumer.zk.registry import read_owners

__all__ = ["Deafness", "IdleVerdict", "idle_verdict", "read_idle_verdict"]


@dataclass(frozen=True)
class IdleVerdict:
    """Whether owning nothing is fine, and why (completes "owns no partition for Ns ...")."""

    healthy: bool
    reason: str
    standby: bool = False


def idle_verdict(view: GroupView, owners: Mapping[str, Mapping[str, str]]) -> IdleVerdict:
    """Judge an idle member from its group ``view`` and ``owners`` (topic -> {"B-P": thread}).

    Only the member's own topics (``view.partitions``) count.
    """
    n_partitions = sum(len(names) for names in view.partitions.values())
    if n_partitions == 0:
        return IdleVerdict(True, "ok")  # nothing to own yet
    mine = view.decide()
    if mine:
        return IdleVerdict(False, f"although the assignment gives it {len(mine)} "
                                  f"partition(s) ({_names(sorted(f'{t}/{p}' for t, p in mine))})")
    unowned = sorted(f"{topic}/{name}" for topic, names in view.partitions.items()
                     for name in names
                     if owners.get(topic, {}).get(name) not in set(view.threads.get(topic, ())))
    if unowned:
        return IdleVerdict(False, f"while {len(unowned)} partition(s) of its topics have no "
                                  f"live owner ({_names(unowned)})")
    n_threads = sum(len(set(ids)) for ids in view.threads.values())
    return IdleVerdict(True, f"standby: {n_threads} consumer threads for {n_partitions} "
                             "partitions, every partition owned", standby=True)


def read_idle_verdict(consumer: GroupConsumer) -> IdleVerdict:
    """`idle_verdict` from ZooKeeper, as the member's next rebalance would see the group."""
    try:
        session = consumer.session
        group = consumer.config.group_id
        view = read_view(session, group, consumer.consumer_id, consumer.subscription)
        owners = {topic: read_owners(session, group, topic) for topic in view.partitions}
    except ZkConsumerError as exc:
        return IdleVerdict(False, f"and the group cannot be read: {exc}")
    return idle_verdict(view, owners)


def _names(items: list[str], limit: int = 5) -> str:
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f", ... {more} more" if more > 0 else "")


class Deafness:
    """Why the member may be missing group changes, once that lasted ``bound`` seconds.

    Two symptoms, each tolerated for the bound (a reconnect or a rebalance passes through
    both for a moment): ZooKeeper watches not armed on the current connection, and an
    assignment that disagrees with the group's reference decision (read from ZooKeeper
    at most every few seconds).  A disagreement also asks for a rebalance at once: if the
    member missed an event, that alone repairs it.  Called by ``/healthz`` only.
    """

    def __init__(self) -> None:
        self._unarmed_since: float | None = None
        self._drift_since: float | None = None
        self._drift_cache: tuple[float, list[str]] | None = None  # (read at, drift)

    def check(self, consumer: GroupConsumer | None, suspended: bool, now: float,
              bound: float) -> str | None:
        """The reason to answer 503, or None."""
        if consumer is None or suspended:
            self._unarmed_since = self._drift_since = None
            return None  # SUSPENDED: paused on purpose, and a session loss is reported apart
        if consumer.watches_armed():
            self._unarmed_since = None
        else:
            if self._unarmed_since is None:
                self._unarmed_since = now
            if now - self._unarmed_since > bound:
                return (f"ZooKeeper watches not armed for {now - self._unarmed_since:.0f}s: "
                        "the member does not see joins, leaves or new partitions")
        cached = self._drift_cache
        if cached is None or now - cached[0] >= min(5.0, bound):
            try:
                drift = consumer.check_assignment()
            except ZkConsumerError:
                drift = cached[1] if cached is not None else []
            self._drift_cache = (now, drift)
            if drift:
                consumer.request_rebalance()
        drift = self._drift_cache[1] if self._drift_cache is not None else []
        if not drift:
            self._drift_since = None
            return None
        if self._drift_since is None:
            self._drift_since = now
        if now - self._drift_since > bound:
            shown = "; ".join(drift[:3]) + (f" (+{len(drift) - 3} more)" if len(drift) > 3
                                            else "")
            return (f"assignment disagrees with the group's decision for "
                    f"{now - self._drift_since:.0f}s (a rebalance was requested): {shown}")
        return None
