"""A stream that cannot run fails at ``start()`` with our message (issue 22.16).

Before: ``spark.readStream.format("kafka07").load(LOG_DIR)`` passed ``.load()`` and the query
died with ``UnboundLocalError: cannot access local variable 'reader'`` -- PySpark's stream
runner calls ``stop()`` on the reader when ``streamReader()`` raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkconsumer.protocol import encode_message_set
from zkconsumer.protocol.logformat import segment_name

pytestmark = pytest.mark.slow


def test_streaming_a_log_dir_says_to_read_it_in_batch(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "logs" / "orders-0").mkdir(parents=True)
    (tmp_path / "logs" / "orders-0" / segment_name(0)).write_bytes(encode_message_set([b"x"]))
    q = (spark.readStream.format("kafka07").load(str(tmp_path / "logs"))
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    with pytest.raises(Exception) as info:
        q.awaitTermination(120)
    text = str(info.value)
    assert "a log directory cannot be read as a stream" in text and "spark.read" in text, text
    assert "UnboundLocalError" not in text
