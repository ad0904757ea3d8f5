"""The bridge keeps every produce request below the 0.7 broker's request limit.

A 0.7 broker closes the connection on a request over ``max.socket.request.bytes`` (100 MiB by
default), and the bridge wrote a poll's share of a 0.7 partition as one request: 500 records
of 1 MB were one 500 MB request, rejected and retried forever.  Here the limit is scaled down
(256 KiB) with ``mirror.bridge.round.bytes`` below it (64 KiB) and polls of 8 KiB records
(about 4 MB a poll): every record must arrive once, in order.
"""

from __future__ import annotations

from bridge_helpers import produce_modern, read_07, register_topic, start_bridge
from fixtures.tansu import create_topic
from fixtures.waiting import wait_until

N = 600


def test_a_poll_of_large_records_is_cut_below_the_request_limit(zk_connect, dev_broker,
                                                                 tansu) -> None:
    broker = dev_broker(num_partitions=1, max_request_size=256 * 1024)
    register_topic([broker], "big07", 1)
    wait_until(lambda: len(read_07(zk_connect, "big07")) == 1, timeout=10,
               what="the 0.7 topic registered")
    create_topic(tansu.bootstrap, "big", 1)
    records = [(None, f"{i:06d}".encode() * 1365) for i in range(N)]  # 8,190 bytes each
    produce_modern(tansu.bootstrap, "big", records, 1)

    bridge = start_bridge(tansu.bootstrap, zk_connect, ["big"], topic_map={"big": "big07"},
                          bridge_round_bytes=64 * 1024)
    try:
        wait_until(lambda: bridge.mirror.stats.messages >= N, timeout=60,
                   what="every record written to 0.7")
    finally:
        bridge.stop()
    assert read_07(zk_connect, "big07") == {"0-0": [v for _k, v in records]}
    assert bridge.mirror.stats.messages == N
