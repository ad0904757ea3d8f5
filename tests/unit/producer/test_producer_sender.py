"""The dispatcher's pure parts: cutting big batches into sets, routing runs of sends."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.producer.cluster import StaticClusterView
from zkconsumer.producer.config import ProducerConfig
from zkconsumer.producer.partitioning import PartitionChooser
from zkconsumer.producer.pool import ConnectionPool
from zkconsumer.producer.queue import Chunk
from zkconsumer.producer.sender import Dispatcher, _cut, _request_groups
from zkconsumer.producer.stats import ProducerStats
from zkconsumer.protocol import default_partition


def raw(chunks: list[Chunk]) -> int:
    return sum(len(p) + 10 for c in chunks for p in c.payloads)


def test_small_batches_stay_whole() -> None:
    chunks = [Chunk("t", None, [b"a" * 10] * 3), Chunk("t", "k", [b"b"])]
    assert _cut(chunks, 1000) == [chunks]


def test_chunks_are_kept_whole_when_they_fit_and_split_only_when_alone_too_big() -> None:
    a = Chunk("t", None, [b"x" * 40] * 2)    # 100 raw bytes
    b = Chunk("t", "k", [b"y" * 40] * 5)     # 250 raw bytes > limit 200
    c = Chunk("t", None, [b"z" * 40])        # 50
    pieces = _cut([a, b, c], 200)
    assert pieces[0][0] == a
    assert all(raw(p) <= 200 for p in pieces)
    # b was split between messages, keeping its key on every part
    parts_of_b = [ch for p in pieces for ch in p if ch.key == "k"]
    assert len(parts_of_b) > 1 and sum(len(ch.payloads) for ch in parts_of_b) == 5


@given(st.lists(st.lists(st.integers(0, 120), min_size=1, max_size=8), max_size=12),
       st.integers(20, 300))
def test_cut_preserves_order_and_respects_the_limit(sizes: list[list[int]], limit: int) -> None:
    chunks = [Chunk("t", f"k{i}", [bytes([i % 256]) * n for n in ns])
              for i, ns in enumerate(sizes)]
    pieces = _cut(chunks, limit)
    flat = [(c.key, p) for piece in pieces for c in piece for p in c.payloads]
    assert flat == [(c.key, p) for c in chunks for p in c.payloads]  # nothing lost/reordered
    for piece in pieces:
        assert piece  # no empty pieces
        messages = sum(len(c.payloads) for c in piece)
        assert raw(piece) <= limit or messages == 1  # only a lone giant may exceed


def test_request_groups_cut_by_bytes() -> None:
    from zkconsumer.protocol import ProduceRequest
    parts = [(ProduceRequest("t", 0, b"x" * 600_000), [], 1, 1) for _ in range(5)]
    groups = _request_groups(parts)  # type: ignore[arg-type]
    assert [len(g) for g in groups] == [3, 2]  # 2 MiB per request


# -- routing runs of single-message sends (Dispatcher._route; broker.list mode, no I/O) --------


def _dispatcher(strategy: str, brokers: int = 2) -> Dispatcher:
    config = ProducerConfig(broker_list=",".join(f"{i}:127.0.0.1:{9000 + i}"
                                                 for i in range(brokers)), partitioner=strategy)
    return Dispatcher(config, StaticClusterView(config), ConnectionPool(config), ProducerStats(),
                      PartitionChooser(strategy, rng=lambda n: 0))


def _routes(d: Dispatcher, chunk: Chunk, excluded: set[int] | None = None
            ) -> list[tuple[int, list[bytes]]]:
    candidates = d._candidates(chunk.topic, excluded or set())
    return [(bp.broker_id, list(c.payloads)) for bp, c in d._route(chunk, candidates)]


def test_unkeyed_single_sends_are_routed_one_by_one() -> None:
    d = _dispatcher("round-robin")  # the counter starts at rng(...) = 0: 0, 1, 0, 1, ...
    run = Chunk("t", None, [b"a", b"b", b"c", b"d", b"e"], True)
    assert _routes(d, run) == [(0, [b"a", b"c", b"e"]), (1, [b"b", b"d"])]  # order kept
    assert _routes(d, run, {0}) == [(1, [b"a", b"b", b"c", b"d", b"e"])]  # one candidate


def test_a_multi_message_send_goes_to_one_partition_whole() -> None:
    d = _dispatcher("round-robin")
    assert _routes(d, Chunk("t", None, [b"a", b"b", b"c"])) == [(0, [b"a", b"b", b"c"])]
    assert _routes(d, Chunk("t", None, [b"d", b"e"])) == [(1, [b"d", b"e"])]


def test_keyed_single_sends_share_the_key_s_partition() -> None:
    d = _dispatcher("hash", brokers=3)
    run = Chunk("t", "user-42", [b"a", b"b", b"c"], True)
    index = default_partition("user-42", 3)
    assert _routes(d, run) == [(index, [b"a", b"b", b"c"])]
    d = _dispatcher("random", brokers=3)  # keys ignored: each message drawn (rng -> 0)
    assert _routes(d, run) == [(0, [b"a", b"b", b"c"])]
