"""`idle_verdict` as a table: when is a member that owns nothing unhealthy?

Thread ids sort as strings (``g_a-0 < g_b-0 < g_c-0``); with P partitions and C threads the
first ``P % C`` threads get one extra, so with 2 partitions and 3 threads ``g_c-0`` is the
standby.
"""

from __future__ import annotations

import pytest

from zkconsumer.consumer.view import GroupView
from zkconsumer.daemon.health import IdleVerdict, idle_verdict


def _view(partitions: dict[str, list[str]], threads: dict[str, list[str]],
          mine: dict[str, list[str]]) -> GroupView:
    return GroupView(members={}, all_topics=[], my_threads=mine, threads=threads,
                     partitions=partitions, brokers={})


THREE = {"t": ["g_a-0", "g_b-0", "g_c-0"]}
OWNED = {"t": {"0-0": "g_a-0", "0-1": "g_b-0"}}


@pytest.mark.parametrize(("partitions", "threads", "mine", "owners", "expected"), [
    # over-provisioned, every partition owned by a live thread: standby, healthy
    ({"t": ["0-0", "0-1"]}, THREE, {"t": ["g_c-0"]}, OWNED,
     IdleVerdict(True, "standby: 3 consumer threads for 2 partitions, every partition owned",
                 standby=True)),
    # the same member, but one partition has no owner znode: the group is not consuming it
    ({"t": ["0-0", "0-1"]}, THREE, {"t": ["g_c-0"]}, {"t": {"0-0": "g_a-0"}},
     IdleVerdict(False, "while 1 partition(s) of its topics have no live owner (t/0-1)")),
    # ... or an owner znode naming a thread that is not registered any more
    ({"t": ["0-0", "0-1"]}, THREE, {"t": ["g_c-0"]},
     {"t": {"0-0": "g_a-0", "0-1": "g_gone-0"}},
     IdleVerdict(False, "while 1 partition(s) of its topics have no live owner (t/0-1)")),
    # threads <= partitions: the assignment gives this member a partition
    ({"t": ["0-0", "0-1"]}, {"t": ["g_a-0", "g_b-0"]}, {"t": ["g_b-0"]},
     {"t": {"0-0": "g_a-0", "0-1": "g_a-0"}},
     IdleVerdict(False, "although the assignment gives it 1 partition(s) (t/0-1)")),
    # standby on t, but u has one partition for its single thread: should own it
    ({"t": ["0-0", "0-1"], "u": ["0-0"]}, {**THREE, "u": ["g_c-0"]},
     {"t": ["g_c-0"], "u": ["g_c-0"]}, {**OWNED, "u": {}},
     IdleVerdict(False, "although the assignment gives it 1 partition(s) (u/0-0)")),
    # no partitions at all (topic not created yet): nothing to own
    ({"t": []}, THREE, {"t": ["g_c-0"]}, {}, IdleVerdict(True, "ok")),
])
def test_idle_verdict(partitions: dict[str, list[str]], threads: dict[str, list[str]],
                      mine: dict[str, list[str]], owners: dict[str, dict[str, str]],
                      expected: IdleVerdict) -> None:
    assert idle_verdict(_view(partitions, threads, mine), owners) == expected


def test_many_unowned_partitions_are_summarised() -> None:
    names = [f"0-{i}" for i in range(8)]
    view = _view({"t": names}, {"t": [f"g_{c}-0" for c in "abcdefghij"]}, {"t": ["g_j-0"]})
    verdict = idle_verdict(view, {"t": {}})
    assert verdict == IdleVerdict(False, "while 8 partition(s) of its topics have no live owner "
                                         "(t/0-0, t/0-1, t/0-2, t/0-3, t/0-4, ... 3 more)")
