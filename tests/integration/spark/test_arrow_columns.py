"""`columns_to_batches`: the zero-copy Arrow path equals the tuple path, row for row.

No Spark session: this is what every executor runs on each fetch of a live-cluster read.
"""

from __future__ import annotations

import pyarrow as pa

from zkconsumer.protocol import Compression, decode_batch, decode_message_set, encode_message_set
from zkconsumer.spark.arrow import ARROW_SCHEMA, columns_to_batches, messages_to_batch


def _data() -> bytes:
    plain = encode_message_set([b"p%d" % i * (i % 5) for i in range(40)])  # empty payloads too
    gz = encode_message_set([b"g%d" % i for i in range(9)], compression=Compression.GZIP)
    sn = encode_message_set([b"s%d" % i * 30 for i in range(7)], compression=Compression.SNAPPY)
    return plain + gz + sn + plain


def test_columns_equal_tuples_with_every_codec_and_a_cut() -> None:
    data = _data()
    messages = decode_message_set(data, 1000).messages
    batch = decode_batch(data, 1000)
    for broker in (3, None):
        got = list(columns_to_batches("orders", broker, 1, batch))
        assert len(got) == 1 and got[0].schema.equals(ARROW_SCHEMA)
        assert got[0].equals(messages_to_batch("orders", broker, 1, messages))
    cut = list(columns_to_batches("orders", 3, 1, batch, count=45))
    assert pa.Table.from_batches(cut).equals(
        pa.Table.from_batches([messages_to_batch("orders", 3, 1, messages[:45])]))


def test_payloads_over_the_binary_limit_are_split_into_several_batches() -> None:
    data = _data()
    messages = decode_message_set(data).messages
    got = list(columns_to_batches("t", 0, 0, decode_batch(data), max_bytes=100))
    assert len(got) > 1
    assert all(b.num_rows >= 1 for b in got)
    assert all(sum(len(v) for v in b.column(5).to_pylist()) <= 100 or b.num_rows == 1
               for b in got)
    assert pa.Table.from_batches(got).equals(
        pa.Table.from_batches([messages_to_batch("t", 0, 0, messages)]))
