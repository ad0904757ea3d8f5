"""The Burrow-style rules (zkconsumer.monitor.evaluator) as tables: one window of samples in,
one status out; plus the group summary and --once's exit statuses."""

from __future__ import annotations

import pytest

from zkconsumer.monitor.evaluator import EvalConfig, Sample, evaluate_group, evaluate_partition
from zkconsumer.monitor.model import GroupObs, MemberObs, PartitionObs, Status, exit_status

CFG = EvalConfig(window=4, interval=10.0)  # a 40 s window
NOW = 1000.0


def obs(offset: int | None, end: int | None, *, committed_s: float | None = None,
        owner: str | None = "c1-0", live: bool = True, error: str | None = None,
        problem: str | None = None) -> PartitionObs:
    return PartitionObs("t", "0-0", owner, live and owner is not None, owner, offset,
                        None if committed_s is None else int(committed_s * 1000), end, error,
                        problem)


def window(*rows: tuple[int | None, int | None], step: float = 10.0,
           committed_s: float | None = None, problem: bool = False) -> list[Sample]:
    """Samples ``step`` s apart ending at NOW; committed_ms = the sample's own time unless
    given (a member that commits every poll)."""
    n = len(rows)
    out = []
    for i, (offset, end) in enumerate(rows):
        t = NOW - (n - 1 - i) * step
        c = t if committed_s is None else committed_s
        out.append(Sample(t, offset, end, int(c * 1000), problem))
    return out


def status(o: PartitionObs, samples: list[Sample], cfg: EvalConfig = CFG) -> Status:
    return evaluate_partition(o, samples, NOW, cfg)[0]


@pytest.mark.parametrize(("rows", "expected"), [
    # caught up at the last sample: OK whatever came before
    ([(10, 50), (20, 60), (30, 70), (70, 70)], Status.OK),
    # consuming, lag going down somewhere: OK
    ([(10, 50), (30, 60), (60, 70), (70, 80)], Status.OK),
    # Burrow rule 5: offset moves, lag never goes down over a full window -> WARN
    ([(10, 50), (20, 70), (30, 90), (40, 110)], Status.WARN),
    # ... but not before the window is full
    ([(20, 70), (30, 90), (40, 110)], Status.OK),
    # ... and not when the lag was zero inside the window (rule 1)
    ([(50, 50), (60, 70), (70, 90), (80, 110)], Status.OK),
    # rule 2: went backwards and did not come back -> REWIND
    ([(100, 200), (110, 200), (5, 200), (20, 200)], Status.REWIND),
    # went backwards and recovered (a rebalance re-committing an older offset) -> not REWIND
    ([(100, 200), (90, 200), (120, 200), (150, 200)], Status.OK),
])
def test_rules_over_a_window(rows: list[tuple[int, int]], expected: Status) -> None:
    samples = window(*rows)
    last_offset, last_end = rows[-1]
    assert status(obs(last_offset, last_end, committed_s=NOW), samples) is expected


def test_stall_needs_lag_a_live_owner_and_a_whole_window_without_progress() -> None:
    rows = [(10, 50)] * 5  # 40 s of the same offset: a whole window
    assert status(obs(10, 50, committed_s=NOW - 40), window(*rows, committed_s=NOW - 40)) \
        is Status.STALL
    # a Scala member rewrites the same value every commit: the mtime is fresh, our samples
    # still show that the offset has not moved for the window
    assert status(obs(10, 50, committed_s=NOW), window(*rows)) is Status.STALL
    # not yet a window: OK
    assert status(obs(10, 50, committed_s=NOW), window(*rows[:3])) is Status.OK
    # a single sample (--once) uses the znode's mtime: unchanged for an hour
    assert status(obs(10, 50, committed_s=NOW - 3600), window((10, 50))) is Status.STALL
    # an idle consumer whose producer just woke up: the lag was 0 inside the window
    idle = [(10, 10), (10, 10), (10, 10), (10, 50)]
    assert status(obs(10, 50, committed_s=NOW - 3600), window(*idle)) is Status.OK


def test_stop_when_nobody_owns_the_partition_and_nothing_was_committed_for_a_window() -> None:
    o = obs(10, 50, committed_s=NOW - 41, owner=None)
    assert status(o, window((10, 50), (10, 50), committed_s=NOW - 41)) is Status.STOP
    o = obs(10, 50, committed_s=NOW - 41, owner="gone-0", live=False)
    assert evaluate_partition(o, window((10, 50), committed_s=NOW - 41), NOW, CFG) == (
        Status.STOP, "lag 40, no commit for 41 s and no live member owns the partition")
    # committed recently: not stopped (yet)
    assert status(obs(10, 50, committed_s=NOW - 5, owner=None),
                  window((10, 50), committed_s=NOW - 5)) is Status.OK


def test_errors_and_ownership_problems() -> None:
    assert evaluate_partition(obs(None, None, error="committed offset unreadable: x"),
                              [], NOW, CFG) == (Status.ERR, "committed offset unreadable: x")
    bad = obs(10, 10, problem="t/0-0 has no owner", owner=None)
    # one poll may catch a rebalance half-way: ERR only after err_cycles polls in a row
    assert status(bad, window((10, 10), problem=True)) is Status.OK
    assert status(bad, window((10, 10), (10, 10), problem=True)) is Status.ERR
    assert status(bad, window((10, 10), problem=True), EvalConfig(window=4, err_cycles=1)) \
        is Status.ERR
    mixed = window((10, 10), (10, 10))
    mixed[0] = mixed[0]._replace(problem=False)
    mixed[1] = mixed[1]._replace(problem=True)
    assert status(bad, mixed) is Status.OK


def test_no_offset_and_allowed_lag() -> None:
    assert status(obs(None, 500), window((None, 500))) is Status.OK
    cfg = EvalConfig(window=4, interval=10.0, allowed_lag=100)
    rows = [(10, 50), (20, 70), (30, 90), (40, 110)]
    assert status(obs(40, 110, committed_s=NOW), window(*rows), cfg) is Status.OK


def test_group_is_its_worst_partition_plus_member_and_topic_problems() -> None:
    parts = [obs(10, 10), PartitionObs("t", "0-1", None, False, None, 5, int((NOW - 100) * 1000),
                                       50)]
    g = GroupObs("g", [], parts, [], ["typo"])
    ev = evaluate_group(g, {}, NOW, CFG, [(NOW - 20, 30), (NOW, 45)])
    assert ev.status is Status.STOP and ev.total_lag == 45 and ev.trend == 15
    assert ev.reasons == [
        "t/0-1 STOP: lag 45, no commit for 100 s and no live member owns the partition",
        "typo: topic not registered by any broker (members wait for it)"]
    ok = evaluate_group(GroupObs("g", [MemberObs("c1", "{ }", {})], [obs(10, 10)], [], ["x"]),
                        {}, NOW, CFG)
    assert ok.status is Status.NOTFOUND
    unreadable = evaluate_group(GroupObs("g", [], [obs(10, 10)], ["member c2 unreadable"], []),
                                {}, NOW, CFG)
    assert unreadable.status is Status.ERR
    d = ev.as_dict()
    assert d["status"] == "STOP" and d["partitions"][1]["status"] == "STOP"
    assert d["history"] == [[NOW - 20, 30], [NOW, 45]]


@pytest.mark.parametrize(("statuses", "code"), [
    ([], 0), ([Status.OK, Status.OK], 0), ([Status.OK, Status.WARN], 1),
    ([Status.REWIND], 1), ([Status.NOTFOUND], 1), ([Status.WARN, Status.STALL], 2),
    ([Status.STOP], 2), ([Status.ERR, Status.OK], 2),
])
def test_once_exit_status(statuses: list[Status], code: int) -> None:
    assert exit_status(statuses) == code


def test_burrow_numbers() -> None:
    assert {s.value: s.number for s in Status} == {
        "NOTFOUND": 0, "OK": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}


def test_config_is_checked() -> None:
    from zkconsumer.errors import ConfigurationError
    for bad in ({"window": 1}, {"interval": 0}, {"allowed_lag": -1}, {"err_cycles": 0}):
        with pytest.raises(ConfigurationError):
            EvalConfig(**bad)  # type: ignore[arg-type]


def test_bridge_rules() -> None:
    from zkconsumer.monitor.evaluator import evaluate_bridge_partition

    def row(end: int | None, *, live: bool = True, intent: str | None = None,
            error: str | None = None) -> PartitionObs:
        return PartitionObs("t07", "0-0", intent, live, None, end, None, 900, error, None,
                            {"orders/0": 12})
    cfg = EvalConfig(window=3, interval=1.0)
    steady = window((500, 900), (500, 900), (500, 900), (500, 900))
    assert evaluate_bridge_partition(row(500), steady, cfg) == (Status.OK,
                                                                "written up to byte 500")
    assert evaluate_bridge_partition(row(None), [], cfg)[0] is Status.OK
    assert evaluate_bridge_partition(row(500, live=False), steady, cfg)[0] is Status.STOP
    assert evaluate_bridge_partition(row(500, error="bridge checkpoint unreadable: x"),
                                     steady, cfg)[0] is Status.ERR
    # a batch in flight: fine while the end moves, STALL once it has not for a window
    assert evaluate_bridge_partition(row(500, intent="m1@500"), steady, cfg)[0] is Status.STALL
    moving = window((300, 900), (400, 900), (500, 900), (500, 900))
    assert evaluate_bridge_partition(row(500, intent="m1@500"), moving, cfg)[0] is Status.OK
    ev = evaluate_group(GroupObs("bridge:b", [], [row(500, intent="m1@500")], [], [],
                                 kind="bridge"), {("t07", "0-0"): steady}, NOW, cfg)
    d = ev.as_dict()
    assert d["kind"] == "bridge" and d["status"] == "STALL" and d["total_lag"] == 0
    assert d["partitions"][0]["sources"] == {"orders/0": 12}
    assert d["partitions"][0]["lag"] is None
