"""The at-least-once target's producer pool (mirror/producer_pool.py, KafkaTarget) and its
property ``mirror.target.producers``.

The producers are real librdkafka producers pointed at a port nothing listens on: they build
and queue without a broker, so what reaches which producer, and what a reset or close does to
every queued message, is observable without one (delivery to a broker is tested against tansu
in tests/integration/mirror/test_mirror_target_pool.py).
"""

from __future__ import annotations

import threading
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Producer
from fixtures.outcomes import Outcomes

from zkconsumer.errors import ConfigurationError
from zkconsumer.mirror.config import MAX_TARGET_PRODUCERS, MirrorConfig, TargetSpec
from zkconsumer.mirror.producer_pool import ProducerPool
from zkconsumer.mirror.runner import make_target
from zkconsumer.mirror.targets import KafkaTarget

NOWHERE = "127.0.0.1:9"  # discard port: nothing answers, nothing is delivered
KAFKA = TargetSpec.parse(f"kafka://{NOWHERE}")


class CountingProducer(Producer):
    """A real librdkafka producer that counts the messages handed to it (``len()`` would
    also count its log and error events, which come and go with the poll thread)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.produced = 0

    def produce(self, *args: Any, **kwargs: Any) -> None:
        super().produce(*args, **kwargs)
        self.produced += 1

    def produce_batch(self, *args: Any, **kwargs: Any) -> int:
        good = super().produce_batch(*args, **kwargs)
        self.produced += good
        return good


@pytest.fixture(autouse=True)
def _counting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confluent_kafka, "Producer", CountingProducer)


def _queued(producer: Any) -> int:
    return int(producer.produced)


def test_a_stream_keeps_its_producer_and_streams_spread_round_robin() -> None:
    target = KafkaTarget([NOWHERE], producers=3)
    try:
        target.open()
        producers = target.producers
        assert len(producers) == 3 and len({id(p) for p in producers}) == 3
        streams = [("t", f"0-{i}") for i in range(6)]
        done = Outcomes()
        for rnd in range(2):
            for s in streams:
                target.send_run("t", [(b"%d" % rnd, 0, None)] * (1 + streams.index(s)), done,
                                stream=s)
        # stream i went to producer i % 3 both rounds: i+1 messages per run, two runs
        expected = [0, 0, 0]
        for i in range(6):
            expected[i % 3] += 2 * (i + 1)
        assert [_queued(p) for p in producers] == expected
        # one run's messages are never split over producers, and a reset keeps the binding
        target.reset()
        assert done.wait(12)
        target.open()
        again = target.producers
        assert not set(map(id, again)) & set(map(id, producers))
        target.send_run("t", [(b"x", 0, None)] * 7, done, stream=streams[4])
        assert [_queued(p) for p in again] == [0, 7, 0]
    finally:
        target.close(0)


def test_reset_fails_the_queued_runs_of_every_producer() -> None:
    target = KafkaTarget([NOWHERE], producers=4)
    target.open()
    try:
        done = Outcomes()
        for i in range(8):
            target.send_run("t", [(b"v", 0, None), (b"w", 1, None)], done, stream=("t", i))
        assert all(_queued(p) == 4 for p in target.producers)
        target.reset()
        assert target.producers == ()
        assert done.wait(8) and len(done.results) == 8
        assert all(exc is not None for exc in done.results)  # purged: the engine resends
        # the next send builds a whole new pool
        target.send_run("t", [(b"v", 0, None)], done, stream="s")
        assert len(target.producers) == 4
    finally:
        target.close(0)


def test_close_flushes_every_producer_within_one_deadline_and_stops_the_poll_threads() -> None:
    before = {t.name for t in threading.enumerate()}
    target = KafkaTarget([NOWHERE], producers=3)
    target.open()
    pollers = [t for t in threading.enumerate()
               if t.name.startswith("mirror-target-poll") and t.name not in before]
    assert len(pollers) == 3
    done = Outcomes()
    for i in range(3):
        target.send_run("t", [(b"v", 0, None)], done, stream=i)
    target.close(0.3)  # nothing can be delivered: the leftovers are purged, i.e. failed
    assert done.wait(3) and all(exc is not None for exc in done.results)
    assert not any(t.is_alive() for t in pollers)
    assert target.producers == () and target.flush(0)


def test_flush_covers_every_producer() -> None:
    target = KafkaTarget([NOWHERE], producers=2)
    target.open()
    try:
        assert target.flush(0)  # nothing queued anywhere
        assert target._pool.index("a") == 0
        done = Outcomes()
        target.send_run("t", [(b"v", 0, None)], done, stream="b")  # the second producer only
        assert [_queued(p) for p in target.producers] == [0, 1]
        assert not target.flush(0.2)  # undeliverable: flush says so
    finally:
        target.close(0)


def test_refused_idempotence_rebuilds_every_producer_without_it(
        caplog: pytest.LogCaptureFixture) -> None:
    built: list[bool] = []
    target = KafkaTarget([NOWHERE], {"acks": "1"}, producers=3)
    original = target._build

    def build() -> Any:
        producer = original()
        built.append(target.idempotent)
        return producer

    target._pool = ProducerPool(3, build)
    try:
        target.open()  # the first build finds acks=1 contradicts idempotence and falls back
        assert built == [False, False, False]
        assert caplog.text.count("falling back") == 1
    finally:
        target.close(0)
    # a broker's refusal (an error callback of any producer) holds for the whole next pool
    other = KafkaTarget([NOWHERE], producers=2)
    flags: list[bool] = []
    first = other._build

    def build_other() -> Any:
        flags.append(other.idempotent)
        return first()

    other._pool = ProducerPool(2, build_other)
    try:
        other.open()
        assert other.check_idempotence_error("_UNSUPPORTED_FEATURE", "InitProducerId")
        other.reset()
        other.open()
        assert flags == [True, True, False, False]
    finally:
        other.close(0)


def test_a_failing_build_leaves_no_producer_behind() -> None:
    made: list[Any] = []

    def build() -> Any:
        if len(made) == 2:
            raise RuntimeError("third producer refused")
        made.append(Producer({"client.id": "pool-test"}))  # no bootstrap: connects nowhere
        return made[-1]

    pool = ProducerPool(3, build)
    with pytest.raises(RuntimeError):
        pool.open()
    assert not pool.opened and pool.producer("s") is None
    with pytest.raises(ValueError):
        ProducerPool(0, build)


def test_the_property_sets_the_pool_size_and_is_validated() -> None:
    cfg = MirrorConfig.from_properties(KAFKA, {"target.producers": "6"}, {},
                                       exactly_once=False)
    assert cfg.target_producers == 6
    target = make_target(cfg)
    assert isinstance(target, KafkaTarget) and target._pool.size == 6
    assert MirrorConfig(target=KAFKA).target_producers == 1
    for bad, msg in (("0", "positive"), ("-1", "positive"), ("x", "integer"),
                     (str(MAX_TARGET_PRODUCERS + 1), f"at most {MAX_TARGET_PRODUCERS}")):
        with pytest.raises(ConfigurationError, match=msg) as err:
            MirrorConfig.from_properties(KAFKA, {"target.producers": bad}, {})
        assert "mirror.target.producers" in str(err.value)
        assert "\n" not in str(err.value)
