"""The 0.7 rebalance decision as pure functions: sorted-string range assignment.

Every member of a 0.7 group -- Scala ``ZookeeperConsumerConnector`` or us -- computes the
whole group's assignment on its own from the same ZooKeeper view and then claims only its
part.  The group converges only if every member computes *exactly* the same thing, so this
module reproduces REFERENCE §2.4 step 6 bit for bit:

* partitions (``"<brokerId>-<partId>"``) and thread ids (``"<consumerId>-<n>"``) are sorted as
  **plain strings** in Java ``String.compareTo`` order, so ``"10-0" < "2-0"`` and
  ``"g_a-10" < "g_a-2"``.  Numeric sorting here would silently split the group with its Scala
  members.  Java compares UTF-16 code units, which differs from Python's code-point order
  once a group or host name mixes characters above U+FFFF with ones in U+E000-U+FFFF, so
  the sort key is the UTF-16-BE encoding (`java_order`);
* with ``P`` partitions and ``C`` threads, the thread at sorted position ``pos`` takes
  ``P // C`` partitions plus one if ``pos < P % C``, starting at
  ``(P // C) * pos + min(pos, P % C)``.

Invariants (tested with hypothesis): every partition is assigned to exactly one thread when
all threads' results are combined; sizes differ by at most one; the earlier threads get the
extras; the result is independent of input order and of duplicates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from zkconsumer.errors import ConsumerError

__all__ = ["assign", "assign_topics", "java_order", "thread_range"]


def java_order(s: str) -> bytes:
    """Sort key giving Java ``String.compareTo`` order (UTF-16 code units, big-endian bytes
    compare like the units themselves)."""
    return s.encode("utf-16-be", "surrogatepass")


def thread_range(pos: int, n_partitions: int, n_threads: int) -> range:
    """The indexes (into the sorted partitions) owned by the thread at sorted position ``pos``."""
    per, extra = divmod(n_partitions, n_threads)
    start = per * pos + min(pos, extra)
    count = per + (1 if pos < extra else 0)
    return range(start, start + count)


def assign(partitions: Sequence[str] | Iterable[str], threads: Sequence[str] | Iterable[str],
           my_threads: Sequence[str] | Iterable[str]) -> dict[str, str]:
    """``{partition: thread}`` for the partitions that ``my_threads`` own.

    ``threads`` are all the group's thread ids for one topic (mine included) and
    ``partitions`` all the topic's partitions.  A thread of mine that is not among
    ``threads`` is a caller bug (the reference asserts): `ConsumerError`.  A thread that gets
    no partition (more threads than partitions) simply has no entry, as in Scala, which only
    logs a warning for it.
    """
    parts = sorted(set(partitions), key=java_order)
    cons = sorted(set(threads), key=java_order)
    index = {t: i for i, t in enumerate(cons)}
    result: dict[str, str] = {}
    for t in sorted(set(my_threads)):
        pos = index.get(t)
        if pos is None:
            raise ConsumerError(f"thread {t!r} is not among the group's threads {cons!r}")
        for i in thread_range(pos, len(parts), len(cons)):
            result[parts[i]] = t
    return result


def assign_topics(partitions: Mapping[str, Iterable[str]], threads: Mapping[str, Iterable[str]],
                  my_threads: Mapping[str, Iterable[str]]) -> dict[str, dict[str, str]]:
    """`assign` for each of my topics: ``{topic: {partition: thread}}``.

    A topic of mine that has no partitions yet (no broker registered it) maps to ``{}``.
    """
    return {
        topic: assign(partitions.get(topic, ()), threads.get(topic, ()), mine)
        for topic, mine in my_threads.items()
    }
