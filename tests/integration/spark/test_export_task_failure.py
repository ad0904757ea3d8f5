"""A failed task ends ``zkconsumer export`` with one line, no ``BrokenPipeError`` traceback.

Before (issue 22.16): when one task failed, Spark killed the others; their Python workers,
still sending rows, died with ``BrokenPipeError`` and PySpark's daemon printed the traceback
on the terminal next to the real error (3 runs of 3 here).  `zkconsumer.spark.daemon` keeps
that case quiet.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zkconsumer.client import BrokerConnection, produce
from zkconsumer.protocol import encode_message_set

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


def test_a_failing_task_leaves_one_error_line(dev_broker: Any, tmp_path: Path) -> None:
    b = dev_broker(zk=False, num_partitions=4)
    with BrokerConnection(b.host, b.port) as conn:
        for p in range(4):
            for _ in range(50):  # 5 MB a partition: the other tasks are busy when one fails
                produce(conn, "t", p, encode_message_set([b"x" * 1000] * 100), confirm=True)
    start = tmp_path / "from.json"  # 0-2 starts inside its first message: that task fails
    start.write_text(json.dumps({"t": {"0-0": 0, "0-1": 0, "0-2": 7, "0-3": 0}}))
    result = subprocess.run(
        [sys.executable, "-m", "zkconsumer", "export", "--brokers", f"0:{b.host}:{b.port}",
         "--num-partitions", "4", "--topic", "t", "--to", str(tmp_path / "out"),
         "--from", str(start), "--master", "local[2]"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1, result.stderr
    assert "BrokenPipeError" not in result.stderr and "Traceback" not in result.stderr, \
        result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "zkconsumer export: error: the Spark job failed: MisalignedOffsetError: option "
        "startingOffsets: offset 7 of t/0-2 is not a message boundary: it is inside the "
        "message [0, 1010), start at 0 or 1010")
