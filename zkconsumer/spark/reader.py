"""Executor-side reading of one planned range into Arrow record batches (no pyspark).

`read_log_range` fetches ``[start, end)`` of a partition from its broker with the client's
`SimpleConsumer.iter_columns` (which already handles partial tails, segment ends and messages
larger than the fetch size) and stops exactly at ``end``: a message -- or a whole compressed
wrapper, inner messages included -- belongs to the range in which its shallow entry *starts*,
so adjacent ranges never share or lose a row.

`read_segment_range` does the same over one segment file with the log-directory reader.

Both end by reporting what they read (`zkconsumer.spark.report.report_range`: rows, the
largest ``next_offset``, torn tails and skipped ranges) to the export that runs them, if any.

Both yield only non-empty batches of `zkconsumer.spark.arrow.ARROW_SCHEMA`.  Spark's
data-source API requires that a ``read()`` produce either batches or tuples, never a mix,
and an empty range simply yields nothing.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator

import pyarrow as pa

from zkconsumer.client import SimpleConsumer
from zkconsumer.client.logdir import ReadIssue, ReadStats, Segment, iter_segment_chunks
from zkconsumer.errors import MessageTooLargeError, MisalignedOffsetError, OffsetOutOfRangeError
from zkconsumer.protocol import MessageBatch
from zkconsumer.spark.arrow import columns_to_batches, messages_to_batch
from zkconsumer.spark.planning import LogRange, SegmentRange
from zkconsumer.spark.report import RangeReport, report_range

__all__ = ["iter_range_columns", "read_log_range", "read_segment_range"]

log = logging.getLogger(__name__)


def iter_range_columns(consumer: SimpleConsumer, r: LogRange
                       ) -> Iterator[tuple[MessageBatch, int]]:
    """``(batch, count)`` per fetch of ``r``: the first ``count`` messages of each decoded
    fetch belong to the range (never zero), and the last one ends exactly at ``r.end``.

    Columns (`SimpleConsumer.iter_columns`), not tuples: with the compiled decoder no Python
    object is made per message, and `columns_to_batches` wraps the columns without copying.
    """
    if r.start >= r.end:
        return
    for next_offset, batch in consumer.iter_columns(r.topic, r.partition, r.start):
        # offsets are non-decreasing (a wrapper's messages share its offset): cut before the
        # first message that starts at or after the end
        count = bisect_left(batch.offsets, r.end)
        if count:
            yield batch, count
        if next_offset >= r.end:
            return
    # The broker reported the end of the log before the frozen end of the plan: the log was
    # truncated (a broker lost unflushed data) or replaced.  Never return silently short.
    raise OffsetOutOfRangeError(
        f"the log ended before the planned end offset {r.end}", topic=r.topic,
        partition=r.partition, offset=r.start)


def read_log_range(r: LogRange, *, fetch_size: int = 1024 * 1024,
                   max_fetch_size: int = 64 * 1024 * 1024,
                   socket_timeout: float = 30.0) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the messages of one `LogRange`, fetched from its broker.

    The two errors a user fixes with an option name it: a message larger than
    ``maxFetchSize``, and a start offset (``startingOffsets``) inside a message.
    """
    rows, reached = 0, None
    max_fetch_size = max(max_fetch_size, fetch_size)
    where = f"{r.topic}/{r.broker_id}-{r.partition}"
    with SimpleConsumer(r.host, r.port, socket_timeout=socket_timeout, fetch_size=fetch_size,
                        max_fetch_size=max_fetch_size) as consumer:
        try:
            for batch, count in iter_range_columns(consumer, r):
                rows += count
                reached = batch.next_offsets[count - 1]  # the largest next_offset read so far
                yield from columns_to_batches(r.topic, r.broker_id, r.partition, batch, count)
        except MessageTooLargeError as exc:
            size = f" of {exc.size} bytes" if exc.size else ""
            raise MessageTooLargeError(
                f"{where}: the message at offset {exc.offset}{size} does not fit in "
                f"maxFetchSize={max_fetch_size} bytes: raise the option maxFetchSize",
                topic=exc.topic, partition=exc.partition, offset=exc.offset,
                size=exc.size) from exc
        except MisalignedOffsetError as exc:
            if exc.offset != r.start:
                raise
            around = ("" if exc.before is None or exc.after is None
                      else f": it is inside the message [{exc.before}, {exc.after}), start at "
                           f"{exc.before} or {exc.after}")
            raise MisalignedOffsetError(
                f"option startingOffsets: offset {r.start} of {where} is not a message "
                f"boundary{around}", topic=exc.topic, partition=exc.partition,
                offset=exc.offset, before=exc.before, after=exc.after) from exc
    report_range(RangeReport(r.topic, r.broker_id, r.partition, r.start, r.end, rows, reached))


def read_segment_range(r: SegmentRange, *, skip_corrupt: bool = False) -> Iterator[pa.RecordBatch]:
    """Arrow batches of one segment file's ``[start, end)``; torn tails and skips are reported.

    A file that ends before the planned ``end`` without a torn tail or corruption to explain
    it (it shrank since planning: truncated, replaced) is reported as a ``gap``: those bytes
    are not exported, and the next segment's rows would otherwise hide the hole.
    """
    segment = Segment(r.path, r.segment_start, r.end - r.segment_start)
    stats = ReadStats()
    reached = None
    for messages in iter_segment_chunks(segment, start=r.start, end=r.end, last=r.last,
                                        on_corrupt="skip" if skip_corrupt else "raise",
                                        stats=stats):
        reached = messages[-1][1]
        yield messages_to_batch(r.topic, r.broker_id, r.partition, messages)
    stopped = r.start if stats.next_offset is None else stats.next_offset
    if stopped < r.end and not stats.issues:  # (torn tails and skips are logged by logdir)
        position = stopped - r.segment_start
        detail = (f"the file ends at position {position}, {r.end - stopped} bytes before the "
                  f"planned end {r.end}")
        log.warning("gap in %s: %s", r.path, detail)
        stats.issues.append(ReadIssue("gap", r.path, position, stopped, detail))
    report_range(RangeReport(r.topic, r.broker_id, r.partition, r.start, r.end, stats.messages,
                             reached, tuple(stats.issues)))
