"""The writer's grouping of a batch's rows by destination partition (issue 13 item 3).

No Spark session: `_groups` is what each write task runs on every Arrow batch.  Keyed rows with
varying keys must go out as one piece per (topic, partition), not one send per row.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from zkconsumer.errors import ConfigurationError
from zkconsumer.protocol import default_partition
from zkconsumer.spark.writer import _groups


def _batch(**columns: list[object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(columns)


def test_keyed_rows_are_grouped_by_destination_partition_in_row_order() -> None:
    keys = [f"k{i % 11}" for i in range(1000)]
    values = [f"v{i}" for i in range(1000)]
    sends = _groups(_batch(key=keys, value=values), "t", 200, lambda topic: 6)
    # one piece per partition that received rows, each at most 200 rows
    by_partition: dict[int, list[bytes]] = {}
    for topic, key, payloads in sends:
        assert topic == "t" and isinstance(key, str) and 0 < len(payloads) <= 200
        by_partition.setdefault(default_partition(key, 6), []).extend(payloads)
    expected: dict[int, list[bytes]] = {}
    for k, v in zip(keys, values, strict=True):
        expected.setdefault(default_partition(k, 6), []).append(v.encode())
    assert by_partition == expected  # every row where its own key routes, in row order
    assert len(sends) == sum(-(-len(v) // 200) for v in expected.values())


def test_unkeyed_rows_topic_column_and_binary_keys() -> None:
    batch = _batch(value=[b"a", b"b", b"c", b"d"], topic=["x", None, "y", "x"],
                   key=[None, None, b"kb", "kb"])
    sends = _groups(batch, "dflt", 200, lambda topic: {"x": 3, "y": 2}.get(topic, 1))
    got = {(t, k if k is None else default_partition(k, {"x": 3, "y": 2}[t])): p
           for t, k, p in sends}
    assert got == {("x", None): [b"a"], ("dflt", None): [b"b"],
                   ("y", default_partition("kb", 2)): [b"c"],
                   ("x", default_partition("kb", 3)): [b"d"]}


def test_a_bad_row_fails_the_batch_before_anything_is_sent() -> None:
    with pytest.raises(ConfigurationError, match="row 2 of a batch has a null value"):
        _groups(_batch(value=["a", "b", None], key=["1", "2", "3"]), "t", 200, lambda t: 2)
    with pytest.raises(ConfigurationError, match="row 1 has no topic"):
        _groups(_batch(value=["a", "b"], topic=["x", None]), None, 200, lambda t: 2)


def test_arrow_and_row_paths_group_alike() -> None:
    from zkconsumer.spark.writer import _arrow_groups, _python_groups

    keys: list[object] = [None if i % 13 == 0 else f"k{i % 17}" for i in range(500)]
    cases = [
        _batch(key=keys, value=[f"v{i}" for i in range(500)]),
        _batch(key=[k.encode() if isinstance(k, str) else k for k in keys],
               value=[b"b%d" % i for i in range(500)]),
        _batch(value=[b"u%d" % i for i in range(50)]),
        _batch(key=[None] * 5, value=["x"] * 5),
    ]
    for batch in cases:
        fast = _arrow_groups(batch, "t", lambda topic: 5)
        assert fast is not None

        def norm(groups: list[tuple[str, object, list[bytes]]]
                 ) -> dict[tuple[str, int], list[bytes]]:
            return {(t, -1 if k is None else default_partition(k, 5)): p  # type: ignore[arg-type]
                    for t, k, p in groups}

        assert norm(fast) == norm(_python_groups(batch, "t", lambda topic: 5))
    # a topic column, no default topic or a null value: the row path (which names the row)
    assert _arrow_groups(_batch(value=["a"], topic=["x"]), "t", lambda t: 1) is None
    assert _arrow_groups(_batch(value=["a"]), None, lambda t: 1) is None
    assert _arrow_groups(_batch(value=["a", None]), "t", lambda t: 1) is None
