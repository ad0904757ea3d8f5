"""A group member in its own process, for ``kill -9`` tests.

    python member_proc.py ZK_CONNECT GROUP TOPIC SESSION_TIMEOUT_MS

Prints ``READY <consumer id>`` once started, then one line per message:
``MSG <partition> <offset> <next_offset> <value>``.  Acknowledgement is manual: a batch is
acked only after its lines were flushed, so "printed" is the processing whose at-least-once
guarantee the parent checks after killing us with SIGKILL.
"""

from __future__ import annotations

import sys

from zkconsumer.consumer import ConsumerConfig, GroupConsumer, Subscription


def main() -> int:
    zk_connect, group, topic, session_ms = sys.argv[1:5]
    config = ConsumerConfig(group_id=group, zk_connect=zk_connect, rebalance_backoff_ms=100,
                            rebalance_retries_max=50, fetcher_backoff_ms=20,
                            autocommit_interval_ms=100, zk_session_timeout_ms=int(session_ms),
                            zk_connection_timeout_ms=10000, fetch_size=64 * 1024,
                            auto_ack=False)
    consumer = GroupConsumer(config, Subscription(topics={topic: 1}))
    consumer.start()
    out = sys.stdout
    out.write(f"READY {consumer.consumer_id}\n")
    out.flush()
    try:
        while True:
            batch = consumer.poll_batch(100, timeout=0.2)
            for m in batch:
                out.write(f"MSG {m.partition} {m.offset} {m.next_offset} {m.value.decode()}\n")
            out.flush()
            for m in batch:
                consumer.ack(m)
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
