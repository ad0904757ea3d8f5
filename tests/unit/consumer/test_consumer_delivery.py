"""Delivery: bounded chunk queues, pause, revoke, stale fetchers, errors (no network)."""

from __future__ import annotations

import threading

import pytest
from fixtures.waiting import wait_until

from zkconsumer.consumer.delivery import Delivery, FetchHandle
from zkconsumer.consumer.message import ConsumerStats, PartitionState
from zkconsumer.errors import MessageTooLargeError


def state(name: str = "0-0", thread: str = "c-0", offset: int = 0) -> PartitionState:
    b, p = (int(x) for x in name.split("-"))
    return PartitionState("t", b, p, thread, offset, offset, 1024)


def msgs(start: int, n: int, size: int = 10) -> list[tuple[int, int, bytes]]:
    return [(start + i * size, start + (i + 1) * size, f"v{start + i * size}".encode())
            for i in range(n)]


def test_poll_updates_positions_auto_ack() -> None:
    stats = ConsumerStats()
    d = Delivery(2, True, stats)
    s, h = state(), FetchHandle()
    assert d.put(h, s, 0, 30, msgs(0, 3))
    assert s.fetch_offset == 30
    m = d.poll(0)
    assert m is not None and (m.topic, m.partition, m.offset, m.next_offset) == ("t", "0-0", 0, 10)
    assert (s.consumed_offset, s.acked_offset) == (10, 10)
    rest = d.poll_batch(10, 0)
    assert [x.offset for x in rest] == [10, 20]
    assert (s.consumed_offset, s.acked_offset) == (30, 30)
    assert stats.messages == 3 and stats.bytes == 30
    assert d.poll(0) is None


def test_manual_ack_leaves_acked_offset() -> None:
    d = Delivery(2, False, ConsumerStats())
    s, h = state(), FetchHandle()
    d.put(h, s, 0, 20, msgs(0, 2))
    assert len(d.poll_batch(5, 0)) == 2
    assert (s.consumed_offset, s.acked_offset) == (20, 0)


def test_backpressure_and_stop() -> None:
    d = Delivery(1, True, ConsumerStats())
    s, h = state(), FetchHandle()
    assert d.put(h, s, 0, 10, msgs(0, 1))
    results: list[bool] = []
    t = threading.Thread(target=lambda: results.append(d.put(h, s, 10, 20, msgs(10, 1))))
    t.start()
    t.join(0.1)
    assert t.is_alive(), "second put must block: the stream queue is full"
    assert d.poll(0) is not None  # frees a slot
    t.join(5)
    assert results == [True] and s.fetch_offset == 20
    # a full queue and a stopped fetcher: put returns False and queues nothing
    t = threading.Thread(target=lambda: results.append(d.put(h, s, 20, 30, msgs(20, 1))))
    t.start()
    t.join(0.1)
    d.stop([h])
    t.join(5)
    assert results == [True, False] and s.fetch_offset == 20
    assert not d.put(h, s, 20, 30, msgs(20, 1))


def test_revoke_drops_queued_and_current_chunks() -> None:
    d = Delivery(5, True, ConsumerStats())
    a, b, h = state("0-0"), state("0-1"), FetchHandle()
    d.put(h, a, 0, 30, msgs(0, 3))
    d.put(h, b, 0, 30, msgs(0, 3))
    first = d.poll(0)
    assert first is not None
    d.revoke([a, b] if first.partition == "0-0" else [b, a])
    assert d.poll(0) is None
    assert not d.put(h, a, 30, 40, msgs(30, 1))
    assert not a.active and not a.released  # released only after the final commit


def test_pause_resume() -> None:
    d = Delivery(5, True, ConsumerStats())
    s, h = state(), FetchHandle()
    d.pause()
    d.put(h, s, 0, 10, msgs(0, 1))
    assert d.poll(0.05) is None
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(d.poll(5)))
    t.start()
    d.resume()
    t.join(5)
    assert got and got[0] is not None


def test_error_chunk_after_messages() -> None:
    d = Delivery(5, True, ConsumerStats())
    s, h = state(), FetchHandle()
    d.put(h, s, 0, 20, msgs(0, 2))
    err = MessageTooLargeError("too big", topic="t", partition="0-0", offset=20)
    assert d.put_error(h, s, err)
    assert s.error is err
    assert len(d.poll_batch(10, 0)) == 2
    with pytest.raises(MessageTooLargeError):
        d.poll_batch(10, 0)
    assert d.poll(0) is None  # raised once


def test_empty_chunk_moves_positions() -> None:
    d = Delivery(5, False, ConsumerStats())
    s, h = state(), FetchHandle()
    d.put(h, s, 0, 40, [])  # e.g. a compressed wrapper around an empty set
    d.put(h, s, 40, 50, msgs(40, 1))
    m = d.poll(0)
    assert m is not None and m.offset == 40
    assert s.acked_offset == 40  # everything before was acknowledged, so it moves too


def test_reset_drops_and_moves() -> None:
    d = Delivery(5, True, ConsumerStats())
    s, h = state(), FetchHandle()
    d.put(h, s, 0, 10, msgs(0, 1))
    assert d.reset(h, s, 500)
    assert (s.fetch_offset, s.consumed_offset, s.acked_offset) == (500, 500, 500)
    assert d.poll(0) is None
    # an answer fetched before the reset is dropped (fetch offset moved)
    assert d.put(h, s, 10, 20, msgs(10, 1))
    assert d.poll(0) is None


def test_round_robin_over_streams() -> None:
    d = Delivery(5, True, ConsumerStats())
    a, b, h = state("0-0", "c-0"), state("0-1", "c-1"), FetchHandle()
    for i in range(3):
        d.put(h, a, i * 10, i * 10 + 10, msgs(i * 10, 1))
        d.put(h, b, i * 10, i * 10 + 10, msgs(i * 10, 1))
    order = [d.poll(0).partition for _ in range(6)]  # type: ignore[union-attr]
    assert order in (["0-0", "0-1"] * 3, ["0-1", "0-0"] * 3)


def test_close_wakes_pollers() -> None:
    d = Delivery(5, True, ConsumerStats())
    got: list[object] = ["sentinel"]
    t = threading.Thread(target=lambda: got.append(d.poll(None)))
    t.start()
    d.close()
    wait_until(lambda: len(got) == 2, what="poller woken")
    assert got[1] is None and d.closed


def test_poll_view_is_lazy_and_equal_to_poll_batch() -> None:
    d = Delivery(5, True, ConsumerStats())
    a, b, h = state("0-0", "c-0"), state("0-1", "c-1"), FetchHandle()
    d.put(h, a, 0, 30, msgs(0, 3))
    d.put(h, b, 0, 20, msgs(0, 2))
    view = d.poll_view(4, 0)
    assert len(view) == 4 and view  # positions moved at hand-out, like poll_batch
    items = list(view)
    assert [view[i] for i in range(4)] == items and view[-1] == items[-1]
    assert view[1:3] == items[1:3]
    assert list(view.values()) == [m.value for m in items]
    expected_last = {m.partition: m for m in items}  # later items overwrite earlier ones
    assert sorted(view.last_per_partition(), key=lambda m: m.partition) == \
        sorted(expected_last.values(), key=lambda m: m.partition)
    with pytest.raises(IndexError):
        view[4]
    rest = d.poll_batch(10, 0)
    assert len(rest) == 1
    assert (a.consumed_offset, b.consumed_offset) == (30, 20)


def test_columns_and_tuples_chunks_serve_both_apis() -> None:
    # a chunk decoded as columns serves the per-message API, one decoded as tuples serves
    # poll_columns; positions move the same way either way
    from zkconsumer.protocol import encode_message_set
    from zkconsumer.protocol.batch import decode_batch

    d = Delivery(4, False, ConsumerStats())
    a, b, h = state("0-0"), state("0-1"), FetchHandle()
    data = encode_message_set([b"x", b"yy", b"zzz"])
    columns = decode_batch(data, 0)
    assert d.put(h, a, 0, len(data), columns)
    assert d.put(h, b, 0, 30, msgs(0, 3))
    got = d.poll_batch(10, timeout=1.0)
    assert [(m.partition, m.offset, m.value) for m in got][:3] == [
        ("0-0", o, v) for o, _, v in columns.messages()]
    assert a.consumed_offset == len(data)
    d.put(h, b, 30, 50, msgs(30, 2))
    cols = d.poll_columns(10, timeout=1.0)
    (run,) = cols.runs()
    assert run.partition == "0-1" and list(run.values()) == [v for _, _, v in msgs(30, 2)]
    assert list(run.offsets) == [30, 40] and run.next_offset == 50 == b.consumed_offset
    assert d.wants_columns
    d.poll(timeout=0.01)
    assert not d.wants_columns
