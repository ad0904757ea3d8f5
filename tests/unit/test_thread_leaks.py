"""The thread-leak check of tests/conftest.py: what it flags, what it lets go (issue 22.7)."""

from __future__ import annotations

import threading

from fixtures.threads import describe, leaked_threads
from kazoo.handlers.threading import SequentialThreadingHandler


def test_a_thread_still_running_is_flagged_and_an_ending_one_is_waited_for() -> None:
    before = set(threading.enumerate())
    stop, ending = threading.Event(), threading.Event()
    stuck = threading.Thread(target=stop.wait, name="stuck")  # non-daemon: watched
    soon = threading.Thread(target=lambda: ending.wait(0.2), name="soon")
    quiet = threading.Thread(target=stop.wait, name="quiet", daemon=True)  # not ours: ignored
    for t in (stuck, soon, quiet):
        t.start()
    try:
        assert leaked_threads(before, grace=1.0) == [stuck]
        assert describe([stuck]) == "stuck (threading)"
    finally:
        stop.set()
        for t in (stuck, soon, quiet):
            t.join()
    assert leaked_threads(before, grace=0.1) == []


def test_a_kazoo_daemon_thread_is_flagged() -> None:
    before = set(threading.enumerate())
    handler = SequentialThreadingHandler()
    handler.start()  # kazoo's worker threads: daemon, but a client left running
    try:
        leaked = leaked_threads(before, grace=0.1)
        assert leaked and all(t.daemon for t in leaked)
        assert "kazoo.handlers.threading" in describe(leaked)
    finally:
        handler.stop()
    assert leaked_threads(before, grace=5.0) == []
