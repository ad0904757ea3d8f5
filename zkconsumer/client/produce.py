"""Produce requests on a `BrokerConnection`, optionally *confirmed*.

The 0.7 caveat: a broker never answers a produce.  When it rejects one (partition out of range,
illegal topic, a bad CRC anywhere in the set, an unknown codec) it closes the connection, and a
plain producer only notices on a later write, if ever: the data is silently lost.

Confirmed produce closes that hole with what the protocol already offers.  A broker reads and
handles the requests of one connection strictly in order, so we follow each produce with an
``OffsetsRequest(topic, partition, LATEST_TIME, 1)`` on the same connection, all in one write:

    PRODUCE p1 | OFFSETS p1 | PRODUCE p2 | OFFSETS p2 | ...

An offsets answer can only come back after the broker parsed and appended the produce before
it, so the number of answers received before the socket closes is exactly the number of parts
accepted.  A missing answer means that part (and every later one) was **not** written.

Cost: one round trip per call instead of none (the answers are read after one pipelined
write, so a call with N parts still costs a single round trip), about 36 bytes more per part on
the wire, and one offsets lookup per part on the broker.

Limits (documented, not hidden): a broker-side ``max.message.size`` smaller than ours makes the
broker drop a set *silently* and keep the connection open; confirmation cannot see that.  A
part sent to partition ``-1`` (broker's choice) is confirmed with an offsets request for
partition 0, which always exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from zkconsumer.client.connection import BrokerConnection
from zkconsumer.client.simple import offsets_response_bound
from zkconsumer.errors import ProduceRejectedError
from zkconsumer.protocol import (
    LATEST_TIME,
    MultiProduceRequest,
    OffsetsRequest,
    ProduceRequest,
    encode_request,
    encode_request_parts,
)

__all__ = ["confirmed_produce", "multiproduce", "produce"]


def produce(conn: BrokerConnection, topic: str, partition: int, message_set: bytes, *,
            confirm: bool = False) -> None:
    """Send one encoded message set to ``topic``/``partition`` (``-1``: the broker picks).

    With ``confirm`` the call returns only once the broker accepted the set, and raises
    `ProduceRejectedError` if it closed the connection instead (the set was not written).
    """
    req = ProduceRequest(topic, partition, message_set)
    if confirm:
        if confirmed_produce(conn, (req,)) != 1:
            raise _rejected(req, 0, 1)
    else:
        conn.send(req)


def multiproduce(conn: BrokerConnection, produces: Sequence[ProduceRequest], *,
                 confirm: bool = False) -> None:
    """Send several message sets in one write.

    Unconfirmed: one MULTIPRODUCE request (a single set goes as a plain PRODUCE).  Confirmed:
    pipelined PRODUCE + OFFSETS pairs (see the module docstring); on a rejection the parts
    before the rejected one *were* written, the rejected one and all later ones were not, and
    `ProduceRejectedError` names the first unwritten part.  Callers that need the exact split
    use `confirmed_produce`.
    """
    if not produces:
        return
    if confirm:
        accepted = confirmed_produce(conn, produces)
        if accepted < len(produces):
            raise _rejected(produces[accepted], accepted, len(produces))
    elif len(produces) == 1:
        conn.send(produces[0])
    else:
        conn.send(MultiProduceRequest(tuple(produces)))


def confirmed_produce(conn: BrokerConnection, produces: Sequence[ProduceRequest]) -> int:
    """Send ``produces`` confirmed; return how many leading parts the broker accepted.

    Never raises for a rejection (the return value says it); connection failures other than a
    close by the broker (timeouts, refused connects) raise `BrokerConnectionError`, and then
    nothing is known about what was written.
    """
    if not produces:
        return 0
    pieces: list[bytes] = []  # written in order, the message sets without a copy
    for req in produces:
        pieces.extend(encode_request_parts(req))
        pieces.append(encode_request(
            OffsetsRequest(req.topic, max(req.partition, 0), LATEST_TIME, 1)))
    answers = conn.exchange(pieces, len(produces), partial_ok=True,
                            max_size=offsets_response_bound(1))
    return len(answers)


def _rejected(req: ProduceRequest, accepted: int, total: int) -> ProduceRejectedError:
    before = f"; the {accepted} part(s) before it were written" if accepted else ""
    later = total - accepted - 1
    after = f"; the {later} part(s) after it were not written either" if later > 0 else ""
    return ProduceRejectedError(
        f"broker rejected the produce to {req.topic}/{req.partition} and closed the "
        f"connection (partition out of range, illegal topic or corrupt data); it was not "
        f"written{before}{after}", topic=req.topic, partition=req.partition)
