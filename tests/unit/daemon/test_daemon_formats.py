"""Batch encoders: exact bytes per format, JSON escaping, and the split invariant."""

from __future__ import annotations

import base64
import json
import struct

import pytest
from daemon_unit_helpers import make_messages
from hypothesis import given
from hypothesis import strategies as st

from zkconsumer.consumer import PartitionRun
from zkconsumer.consumer.message import Message, PartitionState
from zkconsumer.daemon.formats import FORMATS, encoder_for
from zkconsumer.protocol import encode_message_set
from zkconsumer.protocol.batch import decode_batch


def test_raw_and_lines() -> None:
    batch = make_messages(3)
    assert encoder_for("raw")(batch) == b"m0m1m2"
    assert encoder_for("lines")(batch) == b"m0\nm1\nm2\n"
    assert encoder_for("lines")([]) == b""


def test_binary_is_length_prefixed() -> None:
    batch = [Message("t", 0, 0, 0, 10, b""), Message("t", 0, 0, 10, 23, b"abc")]
    assert encoder_for("binary")(batch) == (struct.pack(">i", 0)          # empty value
                                            + struct.pack(">i", 3) + b"abc")


def test_jsonl_fields_and_offsets() -> None:
    batch = make_messages(2, topic="ev", broker=3, partition=1, start=100)
    lines = encoder_for("jsonl")(batch).splitlines()
    objs = [json.loads(line) for line in lines]
    assert objs[0] == {"topic": "ev", "partition": "3-1", "offset": 100, "next_offset": 112,
                       "value": "m0"}
    assert objs[1]["offset"] == 112 and objs[1]["next_offset"] == 124


@pytest.mark.parametrize("value", [b'he said "hi"', b"back\\slash", b"tab\tnew\nline",
                                   "caf\u00e9 \u2603".encode(), b"\x00\x1f", b""])
def test_jsonl_utf8_values_round_trip(value: bytes) -> None:
    out = encoder_for("jsonl")([Message("t", 0, 0, 0, 1, value)])
    assert out.count(b"\n") == 1 and out.endswith(b"\n")
    assert json.loads(out)["value"].encode("utf-8") == value


def test_jsonl_invalid_utf8_goes_to_value_base64() -> None:
    value = b"\xff\xfe binary"
    obj = json.loads(encoder_for("jsonl")([Message("t", 0, 0, 0, 1, value)]))
    assert "value" not in obj
    assert base64.b64decode(obj["value_base64"]) == value


def test_jsonl_base64_encoding() -> None:
    value = b"\x00\x01hello\xff"
    obj = json.loads(encoder_for("jsonl", "base64")([Message("t", 0, 0, 0, 1, value)]))
    assert base64.b64decode(obj["value"]) == value


def test_topic_is_json_escaped() -> None:
    obj = json.loads(encoder_for("jsonl")([Message('we"ird', 0, 0, 0, 1, b"x")]))
    assert obj["topic"] == 'we"ird'


def test_unknown_names() -> None:
    with pytest.raises(ValueError):
        encoder_for("xml")
    with pytest.raises(ValueError):
        encoder_for("lines", "latin-1")


@given(values=st.lists(st.binary(max_size=40), max_size=20), cut=st.integers(0, 20),
       fmt=st.sampled_from(FORMATS), enc=st.sampled_from(["utf-8", "base64"]))
def test_batch_output_splits_anywhere(values: list[bytes], cut: int, fmt: str,
                                      enc: str) -> None:
    """Re-sending a suffix of a batch (exec restart) produces the same byte stream."""
    batch = [Message("t", 1, 2, 10 * i, 10 * i + 10, v) for i, v in enumerate(values)]
    encode = encoder_for(fmt, enc)
    assert encode(batch) == encode(batch[:cut]) + encode(batch[cut:])


@given(values=st.lists(st.binary(max_size=40), min_size=1, max_size=20), cut=st.integers(1, 20),
       fmt=st.sampled_from(FORMATS), enc=st.sampled_from(["utf-8", "base64"]))
def test_runs_encode_like_their_messages_and_split_anywhere(values: list[bytes], cut: int,
                                                            fmt: str, enc: str) -> None:
    """The batch path's bytes are the per-message path's, for whole runs and for slices
    (an exec child restarted inside a run gets the run's rest)."""
    state = PartitionState("t", 1, 2, "t-thread-0", 0, 0, 1024)
    run = PartitionRun(state, decode_batch(encode_message_set(values), 0), 0, len(values))
    encode = encoder_for(fmt, enc)
    whole = encode.runs([run])
    assert whole == encode(list(run.messages()))
    if cut < len(values):
        assert whole == encode.runs([run.slice(0, cut)]) + encode.runs([run.slice(cut)])


def test_run_slices_are_checked() -> None:
    state = PartitionState("t", 0, 0, "t-thread-0", 0, 0, 1024)
    run = PartitionRun(state, decode_batch(encode_message_set([b"a", b"b"]), 0), 0, 2)
    assert [m.value for m in run.slice(1).messages()] == [b"b"]
    assert run.slice(0, 1).next_offset == run.next_offsets[0]
    for bad in ((0, 0), (1, 3), (-1, 1), (2, None)):
        with pytest.raises(IndexError):
            run.slice(*bad)
