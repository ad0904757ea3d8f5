"""`Message` behaves the same on its compiled base (``_speedups.Record``) and on the pure one.

The base is chosen at import time (``ZKCONSUMER_PURE=1`` forces the pure one), so each base
runs the same checks in its own interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from zkconsumer.protocol import accel

CHECKS = textwrap.dedent("""
    import copy, gc, pickle, sys
    from zkconsumer.consumer.message import Message, MessageBatch, PartitionState

    state = PartitionState("t", 3, 1, "t-thread-0", 0, 0, 1024)
    m = Message("t", 3, 1, 120, 230, b"payload", state)
    assert (m.topic, m.broker_id, m.partition_id, m.offset, m.next_offset, m.value) == (
        "t", 3, 1, 120, 230, b"payload")
    assert m.partition == "3-1" and m._state is state and m.claim == state.claim > 0
    bare = Message("t", 3, 1, 120, 230, b"payload")     # state is optional
    assert bare._state is None and bare.claim == 0
    assert bare == m and hash(bare) == hash(m) and bare != Message("t", 3, 1, 120, 231, b"")
    assert repr(m) == ("Message(topic='t', partition='3-1', offset=120, next_offset=230, "
                       "value=<7 bytes>)")
    kw = Message(topic="t", broker_id=3, partition_id=1, offset=120, next_offset=230,
                 value=b"payload")
    assert kw == m
    for bad in ((), ("t", 3, 1, 120, 230), ("t", 3, 1, 120, 230, b"", None, "extra")):
        try:
            Message(*bad)
        except TypeError:
            pass
        else:
            raise AssertionError(f"Message{bad!r} was accepted")
    again = pickle.loads(pickle.dumps(bare))
    assert type(again) is Message and again == bare and again._state is None
    assert copy.copy(m) == m and copy.copy(m)._state is state
    assert not hasattr(m, "__dict__")
    batch = MessageBatch([(state, [(0, 10, b"a"), (10, 21, b"bb")], 0, 2)])
    assert [(x.offset, x.next_offset, x.value, x._state is state) for x in batch] == [
        (0, 10, b"a", True), (10, 21, b"bb", True)]
    # a million short-lived messages leave nothing behind (the base frees every field)
    before = sys.getrefcount(state)
    for i in range(1_000_000):
        Message("t", 3, 1, i, i + 1, b"v", state)
    gc.collect()
    assert sys.getrefcount(state) == before
    print(type(m).__mro__[1].__name__)
""")


def _run(pure: bool) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ZKCONSUMER_PURE"}
    if pure:
        env["ZKCONSUMER_PURE"] = "1"
    done = subprocess.run([sys.executable, "-c", CHECKS], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.parametrize("pure", [False, True], ids=["default", "pure"])
def test_message_on_each_base(pure: bool) -> None:
    base = _run(pure)
    if pure or accel.speedups is None:
        assert base == "_MessageFields"
    else:
        assert base == "Record"


def test_the_compiled_base_is_read_only() -> None:
    if accel.speedups is None:
        pytest.skip(f"compiled decoder unavailable: {accel.REASON}")
    from zkconsumer.consumer.message import Message

    m = Message("t", 0, 0, 0, 1, b"v")
    with pytest.raises(AttributeError):
        m.value = b"w"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        m.extra = 1  # type: ignore[attr-defined]
