"""The soak's judge (zkconsumer/bench/soak_check.py, soak_result.py): pure counting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from zkconsumer.bench.soak_check import count, read_records
from zkconsumer.bench.soak_result import duplicate_bound, peak_rate

LOG = [("0-0", 0, 1), ("0-0", 10, 2), ("0-0", 20, 3), ("0-0", 20, 4), ("0-0", 40, 5),
       ("1-0", 0, 6), ("1-0", 10, 7)]


def test_nothing_lost_and_replays_counted_as_duplicates() -> None:
    records = [*LOG, ("0-0", 20, 3), ("0-0", 20, 4)]  # a compressed set replayed whole
    t = count(range(1, 8), LOG, records)
    assert (t.lost, t.duplicates, t.unknown, t.log_duplicates, t.not_in_log) == (0, 2, 0, 0, [])
    assert t.longest_replay == 2  # ids 3 and 4, consecutive in partition 0-0


def test_gaps_name_partition_offsets_and_ids() -> None:
    records = [e for e in LOG if e[2] not in (2, 3, 4, 7)]
    t = count(range(1, 8), LOG, records)
    assert [g.describe() for g in t.gaps] == [
        "partition 0-0: 3 lost at offsets 10..20, ids 2..4",
        "partition 1-0: 1 lost at offsets 10..10, ids 7..7",
    ]
    assert t.lost == 4


def test_producer_retries_are_not_consumer_duplicates() -> None:
    log = [*LOG, ("1-0", 20, 7)]  # id 7 written twice by a retried send
    t = count(range(1, 8), log, log)
    assert (t.duplicates, t.log_duplicates, t.lost) == (0, 1, 0)
    assert count(range(1, 9), log, log).not_in_log == [8]  # confirmed but absent


def test_mirror_matching_by_id() -> None:
    target = [("0-0", 0, i) for i in (1, 2, 3, 4, 5, 6, 6)]  # 7 missing, 6 twice
    t = count(range(1, 8), LOG, target, by_id=True)
    assert (t.lost, t.duplicates, t.longest_replay) == (1, 1, 1)
    assert t.gaps[0].describe() == "partition 1-0: 1 lost at offsets 10..10, ids 7..7"


def test_read_records_skips_torn_lines_and_seed_messages(tmp_path: Path) -> None:
    out = tmp_path / "m.jsonl"
    out.write_bytes(b'{"topic":"t","partition":"0-0","offset":0,"next_offset":9,"value":"soak-1"}\n'
                    b'{"topic":"t","partition":"0-0","offset":9,"next_offset":20,"value":"seed"}\n'
                    b'{"topic":"t","partition":"0-0","off')
    assert read_records([out, tmp_path / "missing.jsonl"], "t") == ([("0-0", 0, 1)], 1)


def test_peak_rate_over_windows() -> None:
    samples = [(0.0, 0), (0.5, 100), (1.0, 200), (1.5, 1200), (2.0, 1300)]
    assert peak_rate(samples, 0.5) == 2000.0
    assert peak_rate(samples, 1.0) == 1100.0
    assert peak_rate(samples[:1], 0.5) == 0.0


def test_duplicate_bound_per_fault() -> None:
    # per fault: 2 x 0.5 s x 1000 msg/s + 4 partitions x 20 + members hit x 100
    assert duplicate_bound(rate=1000, interval=0.5, partitions=4, max_in_flight=100,
                           hits=[1, 3]) == 2 * 1080 + 400


def test_unwritten_entries_past_the_committed_offset_are_pending_not_lost() -> None:
    records = [e for e in LOG if e[2] not in (2, 5, 7)]
    t = count(range(1, 8), LOG, records, committed={"0-0": 20, "1-0": 0})
    assert [g.describe() for g in t.gaps] == ["partition 0-0: 1 lost at offsets 10..10, ids 2..2"]
    assert [(g.partition, g.ids) for g in t.pending] == [("0-0", [5]), ("1-0", [7])]


def test_longest_replay_counts_consecutive_entries_per_partition() -> None:
    # 0-0 entries 2, 3, 4 replayed (a run of 3), 1-0 entry 6 (a run of 1), 0-0 entry 1 not
    records = [*LOG, ("0-0", 10, 2), ("0-0", 20, 3), ("0-0", 20, 4), ("1-0", 0, 6)]
    assert count(range(1, 8), LOG, records).longest_replay == 3


def test_bench_soak_refuses_unusable_values() -> None:
    for flag in (["--runs", "0"], ["--rate", "0"]):
        proc = subprocess.run([sys.executable, "-m", "zkconsumer", "bench", "soak", *flag],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "must be" in proc.stderr
