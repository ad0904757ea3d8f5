"""How the dispatcher cuts big batches into sets (pure part of zkconsumer.producer.sender)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.producer.queue import Chunk
from zkconsumer.producer.sender import _cut, _request_groups


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
