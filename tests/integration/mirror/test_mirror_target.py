"""KafkaTarget against a real Kafka-protocol broker (tansu)."""

from __future__ import annotations

import logging
import threading

import pytest
from fixtures.tansu import read_partitions

from zkconsumer.errors import TargetError
from zkconsumer.mirror.targets import KafkaTarget


def test_topics_sends_and_callbacks(tansu) -> None:
    target = KafkaTarget([tansu.bootstrap])
    try:
        with pytest.raises(TargetError, match="does not exist"):
            target.partition_count("nope")
        target.create_topic("t", 3, 1)
        target.create_topic("t", 3, 1)  # already there: fine (another mirror won the race)
        assert target.partition_count("t") == 3
        target.open()
        assert target.idempotent
        results: list[BaseException | None] = []
        done = threading.Event()

        def on_done(exc: BaseException | None) -> None:
            results.append(exc)
            if len(results) == 4:
                done.set()

        target.send("t", b"p2", 2, None, on_done)
        target.send("t", b"k", None, b"key", on_done)
        target.send("t", b"p0-a", 0, None, on_done)
        target.send("t", b"p0-b", 0, None, on_done)
        assert target.flush(10)
        assert done.wait(10) and results == [None] * 4
        got = read_partitions(tansu.bootstrap, "t", 4)
        assert [v for _, v in got[0] if v.startswith(b"p0")] == [b"p0-a", b"p0-b"]
        assert got[2][0] == (None, b"p2")
        assert (b"key", b"k") in [r for part in got.values() for r in part]
        # reset throws the client away; the next send builds a new one
        target.reset()
        again = threading.Event()
        target.send("t", b"after-reset", 1, None, lambda exc: again.set() if exc is None
                    else None)
        assert target.flush(10) and again.wait(10)
    finally:
        target.close()


def test_refused_idempotence_falls_back_with_a_warning(tansu, caplog) -> None:
    # acks=1 contradicts idempotence: librdkafka refuses the explicit combination, and the
    # target falls back to a non-idempotent producer rather than not mirroring at all.
    target = KafkaTarget([tansu.bootstrap], {"acks": "1"})
    try:
        with caplog.at_level(logging.WARNING, logger="zkconsumer.mirror.targets"):
            target.open()
        assert not target.idempotent
        assert "falling back" in caplog.text
    finally:
        target.close()
    # a broker that cannot do InitProducerId reports it through the delivery error
    other = KafkaTarget([tansu.bootstrap])
    assert not other.check_idempotence_error("_TIMED_OUT", "not a refusal")
    assert other.idempotent
    assert other.check_idempotence_error("_UNSUPPORTED_FEATURE", "InitProducerId")
    assert not other.idempotent
