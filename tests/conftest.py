"""Root test configuration: loads the fixture plugins every test directory may use, and fails
a test that leaves a thread behind.

Each plugin lives in ``tests/fixtures/`` (on ``sys.path`` via ``pythonpath`` in
pyproject.toml) and owns one kind of real component: ZooKeeper, dev brokers, Spark.

Leaked threads: `_no_leaked_threads` (autouse) compares the threads alive before a test --
after the session- and module-scoped fixtures it uses are up, which are set up first -- with
those alive after its function-scoped fixtures are torn down, waiting up to
``THREAD_GRACE_S`` for threads that are ending, and fails the test (an error at teardown)
naming the threads left: see `fixtures.threads` for which threads are watched.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from fixtures.threads import describe, leaked_threads

pytest_plugins = [
    "fixtures.waiting",
    "fixtures.zookeeper",
    "fixtures.brokers",
    "fixtures.spark",
    "fixtures.tansu",
    "fixtures.proxy",
]


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leaked = leaked_threads(before)
    if leaked:
        pytest.fail(f"the test left {len(leaked)} thread(s) running: {describe(leaked)}; stop "
                    "what started them (a client, a server, a consumer) in the test or its "
                    "fixture", pytrace=False)
