"""`SimpleConsumer.iter_columns`: the fetch loop of `iter_batches`, each fetch a `MessageBatch`.

Real in-process dev broker.  The columns must carry exactly what `iter_batches` yields (values,
reference offsets for compressed wrappers, next fetch offsets), across small fetches that end
inside messages, and a corrupt message must still yield the valid prefix first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkconsumer.client import BrokerConnection, SimpleConsumer, produce
from zkconsumer.errors import CorruptMessageError
from zkconsumer.protocol import Compression, MessageBatch, encode_message_set


@pytest.fixture
def broker(dev_broker: Any) -> Any:
    b = dev_broker(zk=False)
    with BrokerConnection(b.host, b.port) as conn:
        for i, codec in enumerate([*Compression, Compression.NONE]):
            payloads = [b"%d-%d" % (i, j) * (j + 1) for j in range(30)]
            produce(conn, "cols", 0, encode_message_set(payloads, compression=codec),
                    confirm=True)
    return b


@pytest.mark.parametrize("fetch_size", [150, 4096, 1 << 20])
def test_columns_carry_what_iter_batches_yields(broker: Any, fetch_size: int) -> None:
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10,
                        fetch_size=fetch_size) as consumer:
        listed = list(consumer.iter_batches("cols", 0, 0))
        columns = list(consumer.iter_columns("cols", 0, 0))
    assert all(isinstance(batch, MessageBatch) for _, batch in columns)
    assert [(end, batch.messages()) for end, batch in columns] == listed
    assert sum(len(batch) for _, batch in columns) == 120


def test_corrupt_message_yields_the_valid_prefix_as_columns(broker: Any) -> None:
    (path,) = sorted((Path(broker.log_dir) / "cols-0").glob("*.kafka"))
    bad = (10 + 3) + (10 + 6)  # the third message, after b"0-0" and b"0-10-1" (10-byte headers)
    with path.open("r+b") as f:
        f.seek(bad + 10 + 9 - 1)  # last payload byte of the third message (b"0-2" * 3)
        f.write(b"\xff")
    got: list[bytes] = []
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10) as consumer, \
            pytest.raises(CorruptMessageError) as err:
        for _, batch in consumer.iter_columns("cols", 0, 0):
            got.extend(batch.payloads())
    assert got == [b"0-0", b"0-10-1"]
    assert err.value.offset == bad
