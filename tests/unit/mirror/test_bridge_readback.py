"""The bridge's read-back scan (mirror/bridge_readback.py): where a batch starts, byte for byte."""

from __future__ import annotations

from zkconsumer.mirror.bridge_readback import find_batch
from zkconsumer.protocol import encode_message_set


def _set(*values: bytes) -> bytes:
    return encode_message_set(list(values))


def test_found_at_the_start_and_after_other_producers_sets() -> None:
    ours = _set(b"b1", b"b2")
    assert find_batch(ours, ours) == (0, 0)
    other = _set(b"x1", b"x2", b"x3")
    assert find_batch(other + ours + _set(b"y"), ours) == (len(other), len(other))


def test_a_cut_or_unflushed_batch_is_read_on_from_an_entry_boundary() -> None:
    ours = _set(b"b1", b"b2", b"b3")
    other = _set(b"x1")
    # the fetch ended inside our batch: scanned past the other producer's entry only
    assert find_batch(other + ours[:-5], ours) == (None, len(other))
    # nothing flushed yet, or only a cut first entry: nothing scanned
    assert find_batch(b"", ours) == (None, 0)
    assert find_batch(other[:3], ours) == (None, 0)


def test_identical_payloads_of_another_producer_are_not_taken_for_ours() -> None:
    """A message equal to our first one but not followed by the rest of our batch is passed
    over: only the whole batch, byte for byte, counts."""
    ours = _set(b"same", b"ours-2")
    theirs = _set(b"same", b"theirs-2")
    found, _ = find_batch(theirs + ours, ours)
    assert found == len(theirs)
