"""Are offsets about to be written message boundaries?  One rule for import and reset.

A committed offset is the byte position of the next message; one that falls inside a message
makes the group's consumer read garbage (it parks the partition with `MisalignedOffsetError`).
``offsets reset --to FILE`` and ``offsets import`` both refuse such offsets, with the same
check against the broker that holds the partition:

1. quick: fetch 64 KiB at the offset; if whole CRC-checked messages decode from there, it is
   a boundary (random bytes passing a CRC are astronomically unlikely).  An empty answer is
   the log end (a boundary too).
2. otherwise walk the message lengths from the segment start below it
   (`zkconsumer.client.alignment.check_alignment`): inside a message -> refused, naming the
   message boundaries around it; a boundary (the message there is corrupt or bigger than the
   quick fetch) -> accepted; undecided -> refused only if nothing valid starts there (the old
   rule of reset), else accepted with a note.

When the broker cannot be asked (not registered, unreachable) the offset is written with a
note saying it could not be checked -- an import ahead of the topic, or while a broker is
down, is legitimate.  Offsets outside the log are notes for import (the consumer applies
``autooffset.reset``); reset checks ranges itself before.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Protocol

from zkconsumer.client import SimpleConsumer
from zkconsumer.client.alignment import check_alignment
from zkconsumer.errors import BrokerConnectionError, BrokerError, DecodeError, ZnodeDataError
from zkconsumer.protocol import decode_message_set
from zkconsumer.zk.paths import parse_partition_name
from zkconsumer.zk.registry import read_brokers, read_partition_names
from zkconsumer.zk.session import ZkSession

__all__ = ["boundary_problem", "check_boundaries"]

_LEN = struct.Struct(">i")
_QUICK = 65536


class _Target(Protocol):
    """What `check_boundaries` needs of a planned change (`offsets.Change` has it)."""

    @property
    def group(self) -> str: ...
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> str: ...
    @property
    def new(self) -> int: ...


def boundary_problem(consumer: SimpleConsumer, topic: str, partition: int,
                     offset: int) -> tuple[str | None, str | None]:
    """``(problem, note)`` for one offset (module docstring); both None when it is fine.

    Raises `BrokerError` / `BrokerConnectionError` when the broker cannot answer.
    """
    data = consumer.fetch(topic, partition, offset, _QUICK).messages
    if not data:
        return None, None  # the log end
    broken = False
    try:
        if decode_message_set(data, offset, deep=False).valid_bytes:
            return None, None
        length = _LEN.unpack_from(data)[0] if len(data) >= 4 else -1
        broken = length < 5
    except DecodeError:
        broken = True
    verdict = check_alignment(consumer, topic, partition, offset)
    if verdict.aligned is False:
        return (f"{offset} is not the start of a message: it falls {verdict.detail} (the "
                f"nearest message boundaries are {verdict.before} and {verdict.after})"), None
    if verdict.aligned is True:
        return None, (f"{offset} is a message boundary but the message there does not decode "
                      "(corrupt, or larger than 64 KiB): consumers stop there") if broken \
            else None
    if broken:
        return (f"{offset} is not the start of a message (nothing valid starts there; "
                f"{verdict.detail})"), None
    return None, f"{offset}: could not check that it is a message boundary ({verdict.detail})"


def check_boundaries(session: ZkSession, changes: Iterable[_Target], *,
                     socket_timeout: float = 10.0) -> tuple[list[str], list[str]]:
    """``(problems, notes)`` for the new offsets of ``changes``, one line each.

    Only partitions registered in ``/brokers/topics`` are checked (the others are named by
    `offsets.import_warnings`); one connection per broker.
    """
    problems: list[str] = []
    notes: list[str] = []
    brokers = read_brokers(session)
    registered: dict[str, set[str]] = {}
    per_broker: dict[int, list[_Target]] = {}
    for c in changes:
        if c.topic not in registered:
            try:
                registered[c.topic] = set(read_partition_names(session, c.topic))
            except ZnodeDataError:
                registered[c.topic] = set()
        if c.partition in registered[c.topic]:
            per_broker.setdefault(parse_partition_name(c.partition)[0], []).append(c)
    for bid, todo in sorted(per_broker.items()):
        info = brokers.get(bid)
        if info is None:
            notes.extend(f"{c.group} {c.topic} {c.partition}: {c.new} not checked against the "
                         f"log: broker {bid} is not registered" for c in todo)
            continue
        with SimpleConsumer(info.host, info.port, socket_timeout=socket_timeout) as consumer:
            for i, c in enumerate(todo):
                where = f"{c.group} {c.topic} {c.partition}"
                try:
                    problem, note = boundary_problem(
                        consumer, c.topic, parse_partition_name(c.partition)[1], c.new)
                except BrokerConnectionError as exc:
                    notes.extend(f"{d.group} {d.topic} {d.partition}: {d.new} not checked "
                                 f"against the log: broker {bid} at {info.address} is "
                                 f"unreachable ({exc})" for d in todo[i:])
                    break
                except BrokerError as exc:
                    problem, note = None, (f"{c.new} is outside the log, consumers will "
                                           f"apply autooffset.reset ({exc})")
                if problem:
                    problems.append(f"{where}: {problem}")
                if note:
                    notes.append(f"{where}: {note}")
    return problems, notes
