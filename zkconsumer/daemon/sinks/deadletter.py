"""Dead-letter destinations for batches a handler keeps failing on.

A batch goes to a dead letter only after ``--max-retries`` failed retries, and is acknowledged
(so its offsets are committed) only once the dead letter has it for good: the file variant
fsyncs, the topic variant uses a synchronous, confirmed produce.  If writing the dead letter
fails, the batch stays unacknowledged and the handler sink tries again later -- data is never
skipped.

File format: one JSON object per message,
``{"topic":..., "partition":"B-P", "offset":..., "next_offset":..., "value_base64":...,
"error":"<exception repr>", "attempts":N, "failed_at":<unix time>}``.
The topic variant publishes the raw message values, unchanged, to the dead-letter topic.
"""

from __future__ import annotations

import binascii
import contextlib
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from zkconsumer.daemon.formats import MessageLike
from zkconsumer.errors import SinkError, ZkConsumerError

__all__ = ["DeadLetter", "DeadLetterFile", "DeadLetterTopic"]


class DeadLetter:
    """Where a batch goes after its last retry.  `write` raises `SinkError` on failure."""

    description: str = ""

    def write(self, batch: Sequence[MessageLike], error: BaseException, attempts: int) -> None:
        """Store ``batch`` durably, or raise `SinkError`."""
        raise NotImplementedError

    def close(self) -> None:
        """Release files or connections."""


class DeadLetterFile(DeadLetter):
    """Append failed messages as JSON lines to a file, fsynced before returning."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.description = f"file {path}"

    def write(self, batch: Sequence[MessageLike], error: BaseException, attempts: int) -> None:
        now = time.time()
        err = repr(error)[:1000]
        lines = [json.dumps({
            "topic": m.topic, "partition": f"{m.broker_id}-{m.partition_id}",
            "offset": m.offset, "next_offset": m.next_offset,
            "value_base64": binascii.b2a_base64(m.value, newline=False).decode("ascii"),
            "error": err, "attempts": attempts, "failed_at": now,
        }, separators=(",", ":")) for m in batch]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise SinkError(f"cannot write dead-letter file {self.path!r}: {exc}") from exc


class DeadLetterTopic(DeadLetter):
    """Publish failed message values to a topic with the ZooKeeper-aware producer."""

    def __init__(self, topic: str, zk_connect: str) -> None:
        self.topic = topic
        self.zk_connect = zk_connect
        self.description = f"topic {topic}"
        self._producer: Any = None

    def _get_producer(self) -> Any:
        if self._producer is None:
            from zkconsumer.producer import Producer  # only needed when configured

            self._producer = Producer(zk_connect=self.zk_connect, confirm=True)
        return self._producer

    def write(self, batch: Sequence[MessageLike], error: BaseException, attempts: int) -> None:
        try:
            producer = self._get_producer()
            producer.send(self.topic, [m.value for m in batch])
            producer.flush()
        except ZkConsumerError as exc:
            raise SinkError(f"cannot publish to dead-letter topic {self.topic!r}: {exc}") from exc

    def close(self) -> None:
        if self._producer is not None:
            producer, self._producer = self._producer, None
            with contextlib.suppress(ZkConsumerError):
                producer.close()
