"""Offsets that match nothing are an error naming them, not a silent full re-read (issue 22.13).

Before: ``startingOffsets={"order": {"0-0": 75226}}`` (a typo of ``events`` here) and
``{"events": {"9-9": 5}}`` planned the whole topic from earliest, and a log-dir read keyed
``"1-0"`` without ``brokerId`` applied nothing.  Planning only: no Spark needed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka07_data import ProducedCluster

from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import encode_message_set
from zkconsumer.protocol.logformat import segment_name
from zkconsumer.spark.options import parse_read_options
from zkconsumer.spark.planning import Cluster, plan_cluster_read, plan_logdir_read


def _plan(cluster: ProducedCluster, **options: str) -> None:
    opts = parse_read_options({"zookeeper.connect": cluster.zk_connect, "topic": "events",
                               **options})
    with Cluster(opts) as c:
        plan_cluster_read(opts, c)


@pytest.mark.parametrize(("option", "offsets", "message"), [
    ("startingOffsets", {"order": {"0-0": 0}},
     "option startingOffsets names topic(s) order that this read does not include "
     "(the cluster reads events)"),
    ("startingOffsets", {"events": {"9-9": 5}},
     "option startingOffsets: events/9-9 is not a partition of events in the cluster "
     "(it has 0-0, 0-1, 1-0, 1-1)"),
    ("endingOffsets", {"events": {"0-0": -1, "0-7": -1}},
     "option endingOffsets: events/0-7 is not a partition of events"),
])
def test_cluster_offsets_naming_nothing_fail(produced_cluster: ProducedCluster, option: str,
                                             offsets: dict[str, dict[str, int]],
                                             message: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        _plan(produced_cluster, **{option: json.dumps(offsets)})
    assert message in str(info.value)


def test_cluster_offsets_may_leave_partitions_out(produced_cluster: ProducedCluster) -> None:
    """A partition missing from the JSON starts at earliest (documented, unchanged)."""
    _plan(produced_cluster, startingOffsets=json.dumps({"events": {"0-0": -2}}))


def _log_dir(tmp_path: Path) -> str:
    for name in ("orders-0", "orders-1"):
        (tmp_path / name).mkdir()
        (tmp_path / name / segment_name(0)).write_bytes(encode_message_set([b"x"]))
    return str(tmp_path)


@pytest.mark.parametrize(("options", "message"), [
    ({"startingOffsets": '{"orders": {"1-0": 0}}'},
     "option startingOffsets: orders/1-0 names broker 1, but this log directory read has no "
     "brokerId: set the option brokerId=1"),
    ({"brokerId": "3", "startingOffsets": '{"orders": {"0": 0}}'},
     "option startingOffsets: orders/0 is not a partition of broker 3 (brokerId): key it '3-P'"),
    ({"startingOffsets": '{"orders": {"5": 0}}'},
     "option startingOffsets: orders/5 is not a partition of orders in the log directory"),
    ({"endingOffsets": '{"ordres": {"0": 0}}'},
     "option endingOffsets names topic(s) ordres that this read does not include"),
])
def test_log_dir_offsets_naming_nothing_fail(tmp_path: Path, options: dict[str, str],
                                             message: str) -> None:
    opts = parse_read_options({"logDir": _log_dir(tmp_path), **options})
    with pytest.raises(ConfigurationError) as info:
        plan_logdir_read(opts)
    assert message in str(info.value)


def test_log_dir_offsets_in_the_right_form_apply(tmp_path: Path) -> None:
    log_dir = _log_dir(tmp_path)
    one = len(encode_message_set([b"x"]))
    for options, key in (({}, "1"), ({"brokerId": "3"}, "3-1")):
        opts = parse_read_options({"logDir": log_dir, **options,
                                   "startingOffsets": json.dumps({"orders": {key: one}})})
        ranges, starts, _ = plan_logdir_read(opts)
        assert starts["orders"][key] == one
        assert [(r.partition, r.start) for r in ranges] == [(0, 0)]  # partition 1: nothing left
