"""No ZooKeeper client of the test fixtures outlives the step that needs it (issue 22.7).

A session-scoped root client (it made and removed the per-test chroots) ran from the first
ZooKeeper test to the end of the run; a connected kazoo client draws from the global
``random`` module on every turn of its I/O loop, which Hypothesis reported, minutes later, as
"Do not use the random module inside strategies" in unrelated tests.
"""

from __future__ import annotations

import threading

from fixtures.threads import leaked_threads, owner


def test_a_chroot_leaves_no_kazoo_thread_running(zk_connect: str) -> None:
    kazoo = {t for t in threading.enumerate() if owner(t).startswith("kazoo")}
    # a client being stopped may still be ending: give it the check's grace
    assert leaked_threads(set(threading.enumerate()) - kazoo, grace=10.0) == []
