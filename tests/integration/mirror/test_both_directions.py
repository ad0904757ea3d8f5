"""Both directions at once between the same clusters: no record is copied back.

The forward mirror (0.7 -> tansu, exactly-once) and the bridge (tansu -> 0.7) run together on
the same topic while legacy producers write to 0.7 and modern producers write to tansu.  Each
side ends with every record of both producers exactly once: the bridge skips records with the
forward mirror's provenance headers, the forward mirror skips what the bridge recorded in
ZooKeeper as written (loopguard.py), and each counts exactly the other's records as looped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from bridge_helpers import produce_modern, read_07, register_topic, start_bridge
from fixtures.tansu import create_topic, read_records
from fixtures.waiting import wait_until
from mirror_helpers import committed, log_ends, produce


def _wait_for_exactly(side: Callable[[], Counter[bytes]], want: Counter[bytes], what: str,
                      timeout: float = 90) -> None:
    """Wait until ``side()`` holds ``want`` exactly; on timeout say what differed last:
    records missing, records there too often (a loop copies them back), and a sample of each."""
    last: list[Counter[bytes]] = [Counter()]

    def same() -> bool:
        last[0] = side()
        return last[0] == want

    try:
        wait_until(same, timeout=timeout, what=what)
    except AssertionError as exc:
        missing, extra = want - last[0], last[0] - want
        raise AssertionError(
            f"{exc}: last read {sum(last[0].values())} of {sum(want.values())} records; "
            f"{sum(missing.values())} missing (sample {sorted(missing)[:5]}), "
            f"{sum(extra.values())} extra (sample {sorted(extra)[:5]})") from None


def test_both_directions_at_once_copy_nothing_back(zk_connect, dev_broker, tansu,
                                                    start_mirror) -> None:
    brokers = dev_broker.many(2, num_partitions=2)
    register_topic(brokers, "orders", 2)
    wait_until(lambda: len(read_07(zk_connect, "orders")) == 4, timeout=10,
               what="the 0.7 topic registered")
    create_topic(tansu.bootstrap, "orders", 4)
    legacy = [f"legacy-{i:05d}".encode() for i in range(1500)]
    modern = [f"modern-{i:05d}".encode() for i in range(1500)]

    forward = start_mirror(tansu.url, topics=["orders"], group="fwd",
                           transaction_interval_ms=100)
    bridge = start_bridge(tansu.bootstrap, zk_connect, ["orders"], group="bridge")
    try:
        for i in range(0, 1500, 300):  # both sides written while both directions run
            produce(zk_connect, "orders", legacy[i:i + 300], chunk=50)
            produce_modern(tansu.bootstrap, "orders",
                           [(None, v) for v in modern[i:i + 300]], 4)
        everything = Counter(legacy + modern)

        def modern_side() -> Counter[bytes]:
            got = read_records(tansu.bootstrap, "orders", 0, timeout=30)
            return Counter(r.value for part in got.values() for r in part)

        def legacy_side() -> Counter[bytes]:
            return Counter(v for values in read_07(zk_connect, "orders").values()
                           for v in values)

        _wait_for_exactly(modern_side, everything, "tansu holding both producers' records once")
        _wait_for_exactly(legacy_side, everything, "0.7 holding both producers' records once")
        # both directions caught up with each other: the forward mirror committed the whole
        # 0.7 log (bridged records included) and the bridge read every forward-mirrored one
        wait_until(lambda: committed(zk_connect, "fwd", "orders") == log_ends(zk_connect,
                                                                               "orders"),
                   timeout=60, what="the forward mirror past every 0.7 message")
        wait_until(lambda: bridge.mirror.stats.looped == len(legacy), timeout=60,
                   what="the bridge skipping every forward-mirrored record")
    finally:
        forward.stop()
        bridge.stop()
    assert modern_side() == everything  # nothing copied back after catching up either
    assert legacy_side() == everything
    assert forward.mirror.stats.looped == len(modern)
    assert forward.mirror.stats.messages == len(legacy)
    assert bridge.mirror.stats.messages == len(modern)
