"""A write without ``.mode("append")`` ends with a message saying to add it (issue 22.16).

Spark refuses its default mode (errorifexists) for Python data sources and suggests Append
*or* Overwrite; the source then refuses Overwrite.  Its message says what to change.
"""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_overwrite_says_to_append(spark: Any) -> None:
    df = spark.createDataFrame([("a",)], "value string")
    writer = df.write.format("kafka07").option("brokers", "0:127.0.0.1:9").option("topic", "t")
    with pytest.raises(Exception, match="ErrorIfExists"):
        writer.save()  # Spark's own refusal of its default mode
    with pytest.raises(Exception) as info:
        writer.mode("overwrite").save()
    assert ('Kafka 0.7 topics cannot be overwritten, only appended to: write with '
            '.mode("append")') in str(info.value)
