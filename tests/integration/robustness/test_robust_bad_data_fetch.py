"""SimpleConsumer and ``zkconsumer fetch`` on a corrupt message and on a misaligned offset.

A corrupt message must not hide the valid messages in front of it (they share its fetch), and
a start offset inside a message must be named as such, not as "message larger than the fetch
size" after growing the fetch to its maximum.  Real dev broker; the corruption is a flipped
byte in the segment file on disk, the way a bad disk does it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from zkconsumer.cli import main
from zkconsumer.client import BrokerConnection, SimpleConsumer, produce
from zkconsumer.client.alignment import check_alignment
from zkconsumer.errors import CorruptMessageError, MisalignedOffsetError
from zkconsumer.protocol import Compression, encode_message_set

ENTRY = 4 + 6 + 4  # length prefix + magic/attributes/crc + a 4-byte payload


def segment(broker: Any, topic: str, partition: int = 0) -> Path:
    (path,) = sorted((Path(broker.log_dir) / f"{topic}-{partition}").glob("*.kafka"))
    return path


def flip_byte(path: Path, position: int) -> None:
    with path.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.fixture
def broker(dev_broker: Any) -> Any:
    b = dev_broker(zk=False)
    with BrokerConnection(b.host, b.port) as conn:
        produce(conn, "bad", 0, encode_message_set([b"m%03d" % i for i in range(40)]),
                confirm=True)
        produce(conn, "bad", 0, encode_message_set([b"z1", b"z2"],
                                                   compression=Compression.GZIP), confirm=True)
    return b


def test_corrupt_message_yields_the_valid_prefix_then_names_its_offset(broker: Any) -> None:
    bad = 25 * ENTRY
    flip_byte(segment(broker, "bad"), bad + ENTRY - 1)  # last payload byte: CRC mismatch
    got = []
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10) as consumer, \
            pytest.raises(CorruptMessageError) as err:
        for m in consumer.iter_messages("bad", 0, 0):
            got.append(m.value)
    # before: the error came first, the 25 valid messages of the same fetch were never seen
    assert got == [b"m%03d" % i for i in range(25)]
    assert err.value.offset == bad


def test_fetch_cli_prints_the_prefix_and_resumes_at_the_corrupt_message(
        broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    bad = 7 * ENTRY
    flip_byte(segment(broker, "bad"), bad + ENTRY - 1)
    status = main(["fetch", "--broker", broker.address, "--topic", "bad"])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == [f"{i * ENTRY}\tm{i:03d}" for i in range(7)]
    assert f"7 message(s) from bad/0 at {broker.address}; next offset {bad}" in err
    assert f"at byte offset {bad}" in err.splitlines()[-1]


@pytest.mark.parametrize("offset", [17, 5 * ENTRY + 3, 40 * ENTRY + 9])
def test_misaligned_start_offset_is_named_with_its_boundaries(broker: Any,
                                                              offset: int) -> None:
    before = (offset // ENTRY) * ENTRY
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10) as consumer:
        verdict = check_alignment(consumer, "bad", 0, offset)
        assert verdict.aligned is False and verdict.before == before
        with pytest.raises(MisalignedOffsetError) as err:
            list(consumer.iter_messages("bad", 0, offset))
        # aligned offsets (message starts, the log end) are recognised too
        assert check_alignment(consumer, "bad", 0, before).aligned is True
        end = consumer.latest_offset("bad", 0)
        assert check_alignment(consumer, "bad", 0, end).aligned is True
    # before: "message ... larger than max_fetch_size" after fetching up to 16 MiB, or a
    # CRC / magic error that did not say the offset itself was wrong
    assert err.value.offset == offset and err.value.before == before
    assert err.value.after is not None and err.value.after > offset
    assert "misaligned" in str(err.value) and f"{before}" in str(err.value)


def test_fetch_cli_reports_a_misaligned_offset(broker: Any,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["fetch", "--broker", broker.address, "--topic", "bad", "--offset", "17"])
    _, err = capsys.readouterr()
    assert status == 1
    last = err.splitlines()[-1]
    assert "offset 17 of bad/0 is misaligned" in last
    assert f"{ENTRY} (the message holding it) or {2 * ENTRY}" in last


def test_a_corrupt_message_at_an_aligned_start_is_not_called_misaligned(broker: Any) -> None:
    bad = 3 * ENTRY
    flip_byte(segment(broker, "bad"), bad + ENTRY - 1)
    with SimpleConsumer(broker.host, broker.port, socket_timeout=10) as consumer:
        with pytest.raises(CorruptMessageError) as err:
            list(consumer.iter_messages("bad", 0, bad))
        assert not isinstance(err.value, MisalignedOffsetError)
        assert err.value.offset == bad
        # inside the corrupt message: undecided (its length may be the corrupt part), so
        # never a false "misaligned"
        assert check_alignment(consumer, "bad", 0, bad + 1).aligned is None
