"""The forward mirror's lag is live from the first second of a first run (issue 19 §5).

Before, ``zkconsumer_mirror_lag_messages`` was absent from /metrics and ``--progress`` said
``lag ? msgs`` until the backfill ended (the consumer learns a partition's log end only once
its fetcher reaches it).  Now the mirror asks the brokers for the log ends of partitions whose
fetcher has not reached them.  A small ``fetch.size`` keeps the fetchers far from the end for
the whole backfill, and small transactions make it many steps, so the lag is seen while it
is still large.
"""

from __future__ import annotations

import io
import logging
import re

import pytest
from fixtures.tansu import create_topic
from fixtures.waiting import wait_until
from mirror_helpers import produce

from zkconsumer.mirror.metrics import MirrorCollector, MirrorMetrics, MirrorProgress
from zkconsumer.mirror.runner import telemetry

N = 20000
_LAG = re.compile(rb"^zkconsumer_mirror_lag_messages (\d+)", re.M)


def test_lag_is_known_during_the_first_backfill(zk_connect, dev_broker, tansu, start_mirror,
                                                caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="zkconsumer.mirror")
    dev_broker.many(2, num_partitions=2)
    create_topic(tansu.bootstrap, "backlog", 4)
    produce(zk_connect, "backlog", [f"m-{i:06d}-".encode() * 8 for i in range(N)], chunk=200)

    # small transactions and fetches: a backfill of many steps, each visible
    handle = start_mirror(tansu.url, topics=["backlog"], consumer={"fetch_size": 4096},
                          transaction_max_messages=200)
    mirror = handle.mirror
    view = telemetry(mirror)
    metrics = MirrorMetrics(MirrorCollector(mirror.stats, view.partitions, view.behind))
    try:
        def lag_mid_backfill() -> int | None:
            found = _LAG.search(metrics.render())
            mirrored = mirror.stats.messages
            if found is None or not 0 < mirrored < N // 2:
                return None
            return int(found.group(1))

        lag = wait_until(lag_mid_backfill, timeout=60,
                         what="zkconsumer_mirror_lag_messages during the first backfill")
        assert N // 4 < lag <= N  # an estimate, but of the right size
        bar = MirrorProgress(io.StringIO(), interval=0.0, force=True)
        text = bar.update(mirror.stats.snapshot(), view.lag_bytes(), view.owned())
        assert text is not None and "lag ? msgs" not in text, text
        wait_until(lambda: mirror.stats.messages == N, timeout=120, what="the backfill ending")
    finally:
        handle.stop()
    logged = caplog.text
    assert "resuming at 0.7 offset -1" not in logged
    assert "first claim, nothing mirrored yet" in logged
