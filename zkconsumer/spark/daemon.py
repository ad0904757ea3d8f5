"""PySpark's Python worker daemon, without the traceback of a worker whose task was killed.

Why: when one task of a job fails, Spark kills the job's other tasks by closing their
connections; a Python worker still sending rows then dies with ``BrokenPipeError`` and
PySpark's daemon prints that traceback on the driver's terminal (its stderr), after the
one-line error that says what went wrong -- it reads as a second, unexplained failure.

This module is PySpark's daemon (``spark.python.daemon.module``; `zkconsumer.spark.session.
build_session` sets it unless the user chose a daemon) with exactly that case quiet: a worker
whose connection to the JVM is gone exits with status 1 and no traceback (the JVM already
knows why the task ended).  Everything else -- forking, reuse, other errors -- is PySpark's.
Executors import it, so they need zkconsumer, which the data source needs anyway.
"""

from __future__ import annotations

import socket

from pyspark import daemon as _daemon

__all__ = ["worker"]

_pyspark_worker = _daemon.worker


def worker(sock: socket.socket, authenticated: bool) -> int:
    """PySpark's ``worker``; a vanished connection (a killed task) is exit status 1."""
    try:
        code: int = _pyspark_worker(sock, authenticated)
    except (BrokenPipeError, ConnectionResetError):
        return 1
    return code


_daemon.worker = worker

if __name__ == "__main__":
    _daemon.manager()
