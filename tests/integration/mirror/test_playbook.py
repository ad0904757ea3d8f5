"""The reversible cut-over playbook of docs/migration.md, end to end, with its own commands.

Real ZooKeeper (a chroot), two 0.7 dev brokers (2 x 2 partitions, gzip sets), tansu as the
new cluster.  Two 0.7 groups: ``billing`` moves to the new cluster, is rolled back, moves
again -- and once producers switched, rolls back into what the bridge wrote and moves again;
``reports`` stays on 0.7 while producers switch and the bridge feeds it (the bridge is killed
with -9 in the middle), then moves last.  Counting consumers at every step: every
message arrives, and a message arrives twice only where a plan said so.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from bridge_helpers import produce_modern, read_07
from fixtures.waiting import wait_until
from group_helpers import consume07, drain, source_values
from mirror_helpers import committed, log_ends, produce
from playbook import Shell, python_block, read_playbook

from zkconsumer.protocol import Compression

TOPIC = "billing.events"


def test_the_playbook_parses() -> None:
    """The test below relies on this shape of the playbook: say so when it changes."""
    steps = read_playbook()
    assert {n: len(s.sh) for n, s in steps.items() if s.sh} == \
        {1: 1, 2: 1, 3: 3, 4: 2, 6: 1, 7: 2, 8: 1}
    assert len(steps[3].python) == 1
    assert steps[1].sh[0].startswith("zkconsumer mirror --zk $ZK")
    assert steps[6].sh[0].startswith("zkconsumer mirror --from $TARGET")
    assert all("--reverse" in c for c in steps[4].sh)


def modern_member(code: str, group: str, bootstrap: str) -> Any:
    """The playbook's Python consumer (step 3), for ``group``: subscribed and assigned."""
    namespace: dict[str, Any] = {}
    exec(python_block(code, bootstrap).replace('"group.id": "billing"',
                                               f'"group.id": "{group}"'), namespace)
    return namespace["c"]


def plan_total(out: str, column: int) -> int:
    return sum(int(line.split()[column]) for line in out.splitlines()[1:] if line.strip())


def caught_up(zk: str, group: str) -> bool:
    return committed(zk, group, TOPIC) == log_ends(zk, TOPIC)


@pytest.mark.slow
def test_the_playbook_end_to_end(zk_connect, dev_broker, tansu, tmp_path) -> None:
    steps = read_playbook()
    dev_broker(num_partitions=2)
    dev_broker(num_partitions=2)
    shell = Shell(tmp_path, zk_connect, tansu.url)
    try:
        _run(steps, shell, zk_connect, tansu.bootstrap)
    finally:
        shell.close()


def _run(steps: dict[int, Any], shell: Shell, zk: str, bootstrap: str) -> None:
    def produce07(tag: str, n: int) -> None:
        produce(zk, TOPIC, [f"{tag}-{i}".encode() for i in range(n)], chunk=10,
                codec=Compression.GZIP)

    produce07("a", 600)
    assert len(log_ends(zk, TOPIC)) == 4  # 2 brokers x 2 partitions
    consume07(zk, "billing", [TOPIC], 137)
    consume07(zk, "reports", [TOPIC], 211)

    # 1. mirror (live traffic meanwhile)
    mirror = shell.start(steps[1].sh[0])
    produce07("b", 200)
    wait_until(lambda: caught_up(zk, "mirror-to-new"), timeout=120, what="the mirror")

    # 2. verify with the mirror stopped cleanly, then restart it
    shell.terminate(mirror)
    out = shell.run(steps[2].sh[0]).stdout
    assert out.splitlines()[1].split()[-1] == "OK"
    mirror = shell.start(steps[1].sh[0])

    # 3. move billing: snapshot, dry run, apply; the new consumer reads part of the rest
    produce07("c", 100)
    wait_until(lambda: caught_up(zk, "mirror-to-new"), timeout=120, what="the mirror")
    left07 = source_values(zk, TOPIC, group="billing")
    _snapshot, dry, applied = (shell.run(c) for c in steps[3].sh)
    assert (shell.cwd / "billing-07.json").exists()
    assert "dry run" in dry.stderr
    assert plan_total(applied.stdout, 4) == 0  # preserve onto 4 partitions: no replay
    assert plan_total(applied.stdout, 3) == left07.total()
    got_new = Counter(drain(modern_member(steps[3].python[0], "billing", bootstrap),
                                     250))
    assert not got_new - left07 and max(got_new.values()) == 1

    # 4. roll billing back: the 0.7 group gets the rest, and again only what the plan said
    dry, applied = (shell.run(c) for c in steps[4].sh)
    assert "dry run" in dry.stderr
    again = plan_total(applied.stdout, 5)
    rest = left07 - got_new
    got07 = Counter(consume07(zk, "billing", [TOPIC], None, expected=rest.total() + again))
    assert not rest - got07  # nothing skipped
    assert (got07 - rest).total() == again and not (got07 - rest) - got_new

    # 5. move billing again after it consumed a little more on 0.7
    produce07("d", 100)
    wait_until(lambda: caught_up(zk, "mirror-to-new"), timeout=120, what="the mirror")
    consume07(zk, "billing", [TOPIC], 33)
    left07 = source_values(zk, TOPIC, group="billing")
    for command in steps[3].sh:
        shell.run(command)
    got_new = Counter(drain(modern_member(steps[3].python[0], "billing", bootstrap),
                                     None, expected=left07.total()))
    assert got_new == left07  # exactly the rest

    # 6. producers switch: the mirror drains and stops, verify, then the bridge feeds 0.7
    wait_until(lambda: caught_up(zk, "mirror-to-new"), timeout=120, what="the mirror")
    shell.terminate(mirror)
    shell.run(steps[2].sh[0])
    reports_left = source_values(zk, TOPIC, group="reports")
    direct1 = [(None, f"n1-{i}".encode()) for i in range(400)]
    produce_modern(bootstrap, TOPIC, direct1, 4)
    bridge = shell.start(steps[6].sh[0])
    wait_until(lambda: any(v.startswith(b"n1-") for vs in read_07(zk, TOPIC).values()
                           for v in vs), timeout=120, what="the bridge's first records")
    bridge.kill()  # kill -9 in the middle
    bridge.wait(30)
    direct2 = [(None, f"n2-{i}".encode()) for i in range(300)]
    produce_modern(bootstrap, TOPIC, direct2, 4)
    bridge = shell.start(steps[6].sh[0])
    direct = Counter(v for _k, v in direct1 + direct2)
    def in07() -> Counter[bytes]:  # what producers wrote on the new cluster, as 0.7 has it
        return Counter(v for vs in read_07(zk, TOPIC).values() for v in vs
                       if v.startswith(b"n"))

    wait_until(lambda: in07().total() >= direct.total(), timeout=180,
               what="every record written on target in 0.7")
    assert in07() == direct  # the bridge wrote each once, kill -9 or not
    verify = shell.run(steps[2].sh[0])  # direct writes are named, not an EXTRA
    assert "700 records written on target" in verify.stderr
    # the group that stayed gets its 0.7 rest and the new records, each once
    got_reports = Counter(consume07(zk, "reports", [TOPIC], None,
                                    expected=reports_left.total() + direct.total()))
    assert got_reports == reports_left + direct
    # the group that moved reads part of the new records on the new cluster, rolls back into
    # what the bridge wrote (step 4 again), reads the rest on 0.7 and moves again (step 3)
    part = Counter(drain(modern_member(steps[3].python[0], "billing", bootstrap), 300))
    assert not part - direct and max(part.values()) == 1
    _dry, applied = (shell.run(c) for c in steps[4].sh)
    again = plan_total(applied.stdout, 5)
    rest = direct - part
    got07 = Counter(consume07(zk, "billing", [TOPIC], None, expected=rest.total() + again))
    assert not rest - got07  # nothing skipped
    assert (got07 - rest).total() == again and not (got07 - rest) - part
    for command in steps[3].sh:
        shell.run(command)

    # 7. the last 0.7 group moves: stop the bridge, read to the end, translate
    direct3 = [(None, f"n3-{i}".encode()) for i in range(100)]
    produce_modern(bootstrap, TOPIC, direct3, 4)
    wait_until(lambda: in07().total() >= direct.total() + 100, timeout=120, what="the bridge")
    shell.terminate(bridge)
    assert in07() == direct + Counter(v for _k, v in direct3)
    refused = shell.run(steps[7].sh[1], expect=1)  # not at the end of the bridge's writes
    assert "stopped inside them" in refused.stderr
    got_reports = Counter(consume07(zk, "reports", [TOPIC], None, expected=100))
    assert got_reports == Counter(v for _k, v in direct3)
    assert caught_up(zk, "reports")
    describe, applied = (shell.run(c) for c in steps[7].sh)
    assert "reports" in describe.stdout
    assert plan_total(applied.stdout, 3) == plan_total(applied.stdout, 4) == 0  # exact
    direct4 = [(None, f"n4-{i}".encode()) for i in range(50)]
    produce_modern(bootstrap, TOPIC, direct4, 4)  # producers never stopped
    got = Counter(drain(modern_member(steps[3].python[0], "reports", bootstrap),
                                 None, expected=50))
    assert got == Counter(v for _k, v in direct4)  # exactly what came after
    got = Counter(drain(modern_member(steps[3].python[0], "billing", bootstrap), None,
                        expected=150))
    assert got == Counter(v for _k, v in direct3 + direct4)  # billing, moved twice

    # 8. decommission: the last snapshot
    shell.run(steps[8].sh[0])
    assert (shell.cwd / "final-07-offsets.json").exists()
