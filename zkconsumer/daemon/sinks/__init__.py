"""The daemon's sinks: where consumed messages go and how they are acknowledged.

* `FileSink`    -- ``--output FILE|-``: written in batches, acknowledged once written,
  made durable (flush + fsync) before every commit;
* `ExecSink`    -- ``--exec CMD``: a supervised child process reading messages on stdin and
  acknowledging them on stdout (protocol in `zkconsumer.daemon.sinks.exec`);
* `HandlerSink` -- ``--handler module:function``: a Python callable given per-partition
  batches in a worker thread; retried with backoff, optionally dead-lettered.
"""

from __future__ import annotations

from zkconsumer.daemon.config import DaemonConfig
from zkconsumer.daemon.sinks.base import Sink
from zkconsumer.daemon.sinks.deadletter import DeadLetter, DeadLetterFile, DeadLetterTopic
from zkconsumer.daemon.sinks.exec import ExecSink
from zkconsumer.daemon.sinks.file import FileSink
from zkconsumer.daemon.sinks.handler import HandlerSink, load_handler
from zkconsumer.daemon.tracker import AckTracker

__all__ = ["ExecSink", "FileSink", "HandlerSink", "Sink", "load_handler", "make_sink"]


def make_sink(config: DaemonConfig, tracker: AckTracker) -> Sink:
    """The sink ``config`` asks for (imports the handler, which may raise)."""
    if config.sink == "output":
        return FileSink(tracker, config.target, config.format, config.value_encoding)
    if config.sink == "exec":
        return ExecSink(tracker, config.target, config.format, config.value_encoding,
                        restart_backoff=config.restart_backoff,
                        restart_backoff_max=config.restart_backoff_max,
                        max_restarts=config.exec_max_restarts)
    dead_letter: DeadLetter | None = None
    if config.dead_letter:
        dead_letter = DeadLetterFile(config.dead_letter)
    elif config.dead_letter_topic:
        dead_letter = DeadLetterTopic(config.dead_letter_topic, config.consumer.zk_connect)
    return HandlerSink(tracker, load_handler(config.target), batch_size=config.batch_size,
                       max_retries=config.max_retries, retry_backoff=config.retry_backoff,
                       retry_backoff_max=config.retry_backoff_max, dead_letter=dead_letter)
