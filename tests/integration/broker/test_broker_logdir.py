"""On-disk behaviour seen through the wire: rolling, recovery, hand-written 0.7 log dirs,
and many clients at once."""

from __future__ import annotations

import threading

import pytest
from broker_wire import Wire

from zkconsumer.devcluster.brokers import DevBroker
from zkconsumer.errors import BrokerStartupError
from zkconsumer.protocol import Compression, decode_message_set, encode_message_set

MSG = encode_message_set([b"0123456789"])  # 20 bytes


def seg(start: int) -> str:
    return f"{start:020d}.kafka"


def test_roll_after_the_segment_exceeds_the_size_and_big_sets_stay_whole(dev_broker):
    b = dev_broker(zk=False, log_file_size=50)
    big = MSG * 5  # 100 bytes: larger than a segment, written whole
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, big)
        w.produce("t", 0, MSG)  # 100 > 50: roll at 100 first
        w.produce("t", 0, MSG)
        w.produce("t", 0, MSG)
        w.produce("t", 0, MSG)  # segment 100 holds 60 > 50: roll at 160
        assert w.end("t", 0) == 180
        assert w.fetch("t", 0, 0).messages == big
        assert w.fetch("t", 0, 100).messages == MSG * 3
        assert w.fetch("t", 0, 160).messages == MSG
    d = b.log_dir / "t-0"
    assert sorted(p.name for p in d.iterdir()) == [seg(0), seg(100), seg(160)]
    assert [(d / seg(s)).stat().st_size for s in (0, 100, 160)] == [100, 60, 20]


def test_a_hand_written_07_log_dir_is_served(tmp_path, dev_broker, zk_client):
    """What a real 0.7 broker leaves behind: topics with '-', segments from a non-zero start
    (older ones deleted by retention), no clean-shutdown marker."""
    logs = tmp_path / "kafka-logs"
    a = logs / "web-access-log-3"
    a.mkdir(parents=True)
    first = encode_message_set([b"one", b"two"])
    second = encode_message_set([b"three"], compression=Compression.GZIP)
    (a / seg(1000)).write_bytes(first)
    (a / seg(1000 + len(first))).write_bytes(second)
    (logs / "plain-0").mkdir()
    (logs / "plain-0" / seg(0)).write_bytes(b"")
    (logs / "README").write_text("unexplainable file, skipped")
    b = dev_broker(9, log_dir=logs, num_partitions=4)
    end = 1000 + len(first) + len(second)
    with Wire(b.host, b.port) as w:
        assert w.offsets("web-access-log", 3, -2) == (1000,)
        assert w.offsets("web-access-log", 3, -1, 10) == (end, 1000 + len(first), 1000)
        assert w.fetch("web-access-log", 3, 0).error == 1  # before the log start
        got = decode_message_set(w.fetch("web-access-log", 3, 1000).messages, 1000)
        assert [p for _, _, p in got.messages] == [b"one", b"two"]  # stops at the boundary
        got = decode_message_set(w.fetch("web-access-log", 3, 1000 + len(first)).messages)
        assert [p for _, _, p in got.messages] == [b"three"]
        w.produce("web-access-log", 3, MSG)
        assert w.end("web-access-log", 3) == end + 20
    assert sorted(zk_client.get_children("/brokers/topics")) == ["plain", "web-access-log"]
    assert zk_client.get("/brokers/topics/web-access-log/9")[0] == b"4"


@pytest.mark.parametrize("tail", [MSG[:7], b"\x00\x00", MSG[:-1] + b"\xee" + MSG,
                                  b"\x00\x00\x00\x02\x01\x00"],
                         ids=["torn message", "torn length", "corrupt crc", "too short"])
def test_recovery_truncates_a_torn_or_corrupt_tail(tmp_path, dev_broker, tail):
    logs = tmp_path / "logs"
    d = logs / "t-0"
    d.mkdir(parents=True)
    good = MSG * 3
    (d / seg(0)).write_bytes(MSG * 2)  # an older, full segment is trusted as is
    (d / seg(40)).write_bytes(good + tail)
    b = dev_broker(zk=False, log_dir=logs)
    assert (d / seg(40)).read_bytes() == good
    with Wire(b.host, b.port) as w:
        assert w.end("t", 0) == 100
        w.produce("t", 0, MSG)
        assert w.fetch("t", 0, 40).messages == good + MSG


def test_clean_shutdown_marker_skips_recovery_like_the_reference(tmp_path, dev_broker):
    b = dev_broker(zk=False)
    with Wire(b.host, b.port) as w:
        w.produce("t", 0, MSG)
        assert w.end("t", 0) == 20
    b.stop()
    marker = b.log_dir / ".kafka_cleanshutdown"
    assert marker.exists()
    b2 = dev_broker.restart(b)
    assert not marker.exists()  # consumed at start, rewritten at the next clean stop
    with Wire(b2.host, b2.port) as w:
        assert w.fetch("t", 0, 0).messages == MSG


def test_segments_that_do_not_join_up_refuse_to_start(tmp_path):
    d = tmp_path / "logs" / "t-0"
    d.mkdir(parents=True)
    (d / seg(0)).write_bytes(MSG)
    (d / seg(50)).write_bytes(MSG)  # should start at 20
    with pytest.raises(BrokerStartupError, match="don't validate"):
        DevBroker(0, tmp_path / "logs").start()


def test_many_concurrent_producers_and_fetchers(dev_broker):
    b = dev_broker(zk=False, num_partitions=2, log_file_size=4096)
    n_producers, per_producer = 8, 150
    errors: list[BaseException] = []
    done = threading.Event()

    def produce(i: int) -> None:
        try:
            with Wire(b.host, b.port) as w:
                for j in range(per_producer):
                    w.produce("c", i % 2, [f"{i}:{j}".encode()])
                w.end("c", i % 2)  # barrier: all handled
        except BaseException as exc:
            errors.append(exc)

    def fetch_loop() -> None:
        try:
            with Wire(b.host, b.port) as w:
                while not done.is_set():
                    for p in (0, 1):
                        off = 0
                        while True:
                            r = w.fetch("c", p, off, 1 << 16)
                            assert r.error == 0
                            got = decode_message_set(r.messages, off)
                            if not got.messages:
                                break
                            off = got.messages[-1][1]
        except BaseException as exc:
            errors.append(exc)

    fetchers = [threading.Thread(target=fetch_loop) for _ in range(3)]
    producers = [threading.Thread(target=produce, args=(i,)) for i in range(n_producers)]
    for t in fetchers + producers:
        t.start()
    for t in producers:
        t.join(60)
    done.set()
    for t in fetchers:
        t.join(60)
    assert not errors, errors
    seen: dict[int, list[int]] = {i: [] for i in range(n_producers)}
    with Wire(b.host, b.port) as w:
        for p in (0, 1):
            off, end = 0, w.end("c", p)
            while off < end:
                got = decode_message_set(w.fetch("c", p, off, 1 << 20).messages, off)
                for _, _, payload in got.messages:
                    i, j = map(int, payload.split(b":"))
                    assert i % 2 == p
                    seen[i].append(j)
                off = got.messages[-1][1]
    assert all(seq == list(range(per_producer)) for seq in seen.values())
    assert len(list((b.log_dir / "c-0").iterdir())) > 1  # rolled while being read
