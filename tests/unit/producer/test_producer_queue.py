"""The async queue: enqueue policies (queue.enqueueTimeout.ms), batch triggers, flush."""

from __future__ import annotations

import threading
import time

import pytest
from fixtures.waiting import wait_until

from zkconsumer.errors import ProducerError, QueueFullError
from zkconsumer.producer.queue import Chunk, SendQueue


def chunk(n: int, topic: str = "t") -> Chunk:
    return Chunk(topic, None, [b"m%d" % i for i in range(n)])


def test_policy_zero_raises_at_once_and_enqueues_nothing() -> None:
    q = SendQueue(5, 0)
    q.put(chunk(4))
    with pytest.raises(QueueFullError, match="4/5"):
        q.put(chunk(2))
    assert q.queued == 4 and q.pending == 4
    q.put(chunk(1))  # still fits exactly
    assert q.queued == 5


def test_policy_positive_waits_then_raises() -> None:
    q = SendQueue(1, 50)
    q.put(chunk(1))
    start = time.monotonic()
    with pytest.raises(QueueFullError, match="after 50 ms"):
        q.put(chunk(1))
    assert time.monotonic() - start >= 0.045


def test_policy_positive_succeeds_when_room_appears() -> None:
    q = SendQueue(1, 10_000)
    q.put(chunk(1))
    done = threading.Event()
    t = threading.Thread(target=lambda: (q.put(chunk(1, "second")), done.set()))
    t.start()
    assert q.take(1, 60.0)[0].topic == "t"
    wait_until(done.is_set, what="blocked put to complete")
    t.join()
    assert q.take(1, 60.0)[0].topic == "second"


def test_policy_negative_blocks_until_room() -> None:
    q = SendQueue(2, -1)
    q.put(chunk(2))
    done = threading.Event()
    t = threading.Thread(target=lambda: (q.put(chunk(2)), done.set()))
    t.start()
    assert not done.wait(0.05)  # it is blocked (bounded check, not a sleep-to-wait)
    q.take(2, 60.0)
    wait_until(done.is_set, what="blocked put to complete")
    t.join()


def test_chunk_larger_than_the_queue_is_admitted_when_empty() -> None:
    q = SendQueue(3, 0)
    q.put(chunk(10))
    assert q.queued == 10
    with pytest.raises(QueueFullError):
        q.put(chunk(1))


def test_take_on_batch_size_returns_whole_chunks_up_to_the_size() -> None:
    q = SendQueue(100, 0)
    for n in (3, 3, 3):
        q.put(chunk(n))
    batch = q.take(6, 60.0)  # 9 >= 6 queued: due now; 3+3 fit, the third would overflow
    assert [len(c.payloads) for c in batch] == [3, 3]
    assert q.queued == 3 and q.pending == 9
    q.done(6)
    assert q.pending == 3


def test_take_returns_one_oversized_chunk_alone() -> None:
    q = SendQueue(100, 0)
    q.put(chunk(50))
    q.put(chunk(1))
    assert [len(c.payloads) for c in q.take(10, 60.0)] == [50]


def test_take_on_queue_time() -> None:
    q = SendQueue(100, 0)
    q.put(chunk(1))
    start = time.monotonic()
    batch = q.take(200, 0.05)  # below batch size: waits for the oldest chunk's age
    assert len(batch) == 1 and time.monotonic() - start >= 0.045


def test_take_with_injected_clock_sees_old_chunks_as_due() -> None:
    now = [100.0]
    q = SendQueue(100, 0, clock=lambda: now[0])
    q.put(chunk(1))
    now[0] += 5.0
    assert len(q.take(200, 5.0)) == 1  # due without any real waiting


def test_flush_makes_the_batch_due_and_waits_for_done() -> None:
    q = SendQueue(100, 0)
    q.put(chunk(2))
    sent: list[int] = []

    def sender() -> None:
        batch = q.take(200, 3600.0)  # would linger an hour without the flush
        sent.append(sum(len(c.payloads) for c in batch))
        q.done(sent[-1])

    t = threading.Thread(target=sender)
    t.start()
    assert q.wait_empty(timeout=10)
    t.join()
    assert sent == [2] and q.pending == 0


def test_wait_empty_times_out_when_nothing_sends() -> None:
    q = SendQueue(100, 0)
    q.put(chunk(1))
    assert q.wait_empty(timeout=0.02) is False


def test_close_drains_then_ends() -> None:
    q = SendQueue(100, -1)
    q.put(chunk(1))
    q.close()
    assert len(q.take(200, 3600.0)) == 1
    assert q.take(200, 3600.0) == []
    with pytest.raises(ProducerError, match="closed"):
        q.put(chunk(1))


def test_close_wakes_a_blocked_put() -> None:
    q = SendQueue(1, -1)
    q.put(chunk(1))
    errors: list[Exception] = []

    def put() -> None:
        try:
            q.put(chunk(1))
        except ProducerError as exc:
            errors.append(exc)

    t = threading.Thread(target=put)
    t.start()
    q.close()
    t.join(10)
    assert errors and "closed" in str(errors[0])


# -- single-message sends (put_one): runs, cuts, ages, policies ---------------------------------


def test_single_sends_with_the_same_topic_and_key_form_one_run() -> None:
    q = SendQueue(100, 0)
    for i in range(3):
        q.put_one("t", None, b"a%d" % i)
    q.put_one("t", "k", b"k0")
    q.put_one("t", "k", b"k1")
    q.put_one("u", None, b"u0")
    q.put_one("t", None, b"a3")
    q.close()
    batch = q.take(100, 60.0)
    assert batch == [Chunk("t", None, [b"a0", b"a1", b"a2"], True),
                     Chunk("t", "k", [b"k0", b"k1"], True), Chunk("u", None, [b"u0"], True),
                     Chunk("t", None, [b"a3"], True)]  # FIFO order kept across runs
    assert q.queued == 0 and q.pending == 7


def test_a_multi_message_send_is_its_own_run_and_never_cut() -> None:
    q = SendQueue(100, 0)
    mine = [b"m0", b"m1", b"m2"]
    q.put_one("t", None, b"s0")
    q.put(Chunk("t", None, mine))
    q.put_one("t", None, b"s1")  # does not join the multi-message run
    assert mine == [b"m0", b"m1", b"m2"]  # the caller's list is never appended to
    assert q.take(2, 0.0) == [Chunk("t", None, [b"s0"], True)]  # 1 + 3 > 2: not cut
    assert q.take(2, 0.0) == [Chunk("t", None, [b"m0", b"m1", b"m2"], False)]  # alone
    assert q.take(2, 0.0) == [Chunk("t", None, [b"s1"], True)]


def test_a_run_of_single_sends_is_cut_at_the_batch_size_and_the_rest_sealed() -> None:
    q = SendQueue(100, 0)
    for i in range(5):
        q.put_one("t", None, b"%d" % i)
    assert q.take(3, 60.0) == [Chunk("t", None, [b"0", b"1", b"2"], True)]
    q.put_one("t", None, b"5")  # starts a new run: the cut rest is no longer the tail
    q.close()
    assert q.take(10, 60.0) == [Chunk("t", None, [b"3", b"4"], True),
                                Chunk("t", None, [b"5"], True)]


def test_a_taken_run_is_never_appended_to() -> None:
    q = SendQueue(100, 0)
    q.put_one("t", None, b"a")
    batch = q.take(1, 60.0)
    q.put_one("t", None, b"b")
    assert batch == [Chunk("t", None, [b"a"], True)]  # the sender's list did not grow
    assert q.queued == 1


def test_the_rest_of_a_cut_run_is_due_by_the_age_of_its_oldest_message() -> None:
    now = [100.0]
    q = SendQueue(100, 0, clock=lambda: now[0])
    for i in range(5):
        q.put_one("t", None, b"%d" % i)  # the run is stamped 100.0
    assert len(q.take(3, 5.0)[0].payloads) == 3  # due by count
    now[0] = 104.0
    q.put_one("t", None, b"late")  # a new run, stamped 104.0
    now[0] = 105.0
    # the rest was queued at or after 100.0 and is sent by 105.0: never later than queue.time
    assert [c.payloads for c in q.take(100, 5.0)] == [[b"3", b"4"], [b"late"]]


def test_single_sends_wake_a_waiting_sender_when_the_batch_is_full() -> None:
    q = SendQueue(100, 0)
    got: list[list[Chunk]] = []
    t = threading.Thread(target=lambda: got.append(q.take(3, 3600.0)))
    t.start()
    for i in range(3):
        q.put_one("t", None, b"%d" % i)
    t.join(10)
    assert got == [[Chunk("t", None, [b"0", b"1", b"2"], True)]]


def test_single_send_policies_on_a_full_queue() -> None:
    q = SendQueue(2, 0)
    q.put_one("t", None, b"a")
    q.put_one("t", None, b"b")
    with pytest.raises(QueueFullError, match="2/2"):
        q.put_one("t", None, b"c")
    assert q.queued == 2 and q.pending == 2
    q.enqueue_timeout_ms = 30
    start = time.monotonic()
    with pytest.raises(QueueFullError, match="after 30 ms"):
        q.put_one("t", None, b"c")
    assert time.monotonic() - start >= 0.025
    q.enqueue_timeout_ms = -1
    done = threading.Event()
    t = threading.Thread(target=lambda: (q.put_one("t", None, b"c"), done.set()))
    t.start()
    assert not done.wait(0.05)  # blocked (bounded check, not a sleep-to-wait)
    assert q.take(1, 60.0) == [Chunk("t", None, [b"a"], True)]
    wait_until(done.is_set, what="blocked single send to complete")
    t.join()
    q.close()
    assert [c.payloads for c in q.take(10, 60.0)] == [[b"b"], [b"c"]]  # the cut rest is sealed
    with pytest.raises(ProducerError, match="closed"):
        q.put_one("t", None, b"d")


def test_drain_returns_runs_in_order() -> None:
    q = SendQueue(100, 0)
    q.put_one("t", None, b"a")
    q.put(chunk(2))
    q.put_one("t", None, b"b")
    assert [len(c.payloads) for c in q.drain()] == [1, 2, 1]
    assert q.queued == 0


def test_the_first_single_send_starts_the_queue_time_of_an_idle_sender() -> None:
    q = SendQueue(100, 0)
    got: list[list[Chunk]] = []
    t = threading.Thread(target=lambda: got.append(q.take(100, 0.05)))
    t.start()
    wait_until(lambda: q._sender_waiting, what="sender waiting on the empty queue")
    q.put_one("t", "k", b"first")  # must wake it: without a wake it would wait forever
    t.join(10)
    assert got == [[Chunk("t", "k", [b"first"], True)]]


def test_a_backlog_is_taken_as_several_full_batches() -> None:
    q = SendQueue(100, 0)
    for i in range(10):
        q.put_one("t", None, b"%d" % i)
    batches = q.take_batches(3, 60.0, 8)  # 3 full batches; the last message waits
    assert [[p for c in b for p in c.payloads] for b in batches] == [
        [b"0", b"1", b"2"], [b"3", b"4", b"5"], [b"6", b"7", b"8"]]
    assert q.queued == 1 and q.pending == 10
    for i in range(10, 16):
        q.put_one("t", None, b"%d" % i)
    assert len(q.take_batches(3, 60.0, 2)) == 2  # at most max_batches
    q.close()
    assert [len(b) for b in q.take_batches(3, 60.0, 8)] == [1]  # the rest: one batch
    assert q.take_batches(3, 60.0, 8) == []
