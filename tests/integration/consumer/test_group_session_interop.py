"""Session expiry in a group shared with Scala members: nothing may stay owned by a ghost.

Found by the interop audit: an owner-znode create in flight when our session died is retried
by the session layer and can land on the *new* session.  Before the fix, the member then
released "everything" (its states) and re-registered, but that znode -- our thread id, our
new session, no state -- was never deleted: the member the next rebalance gave that
partition to could never claim it, and a Scala member gives up after its retries.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from fixtures.waiting import wait_until
from groupkit import GROUP, ScalaMember, owners, produce_to
from kazoo.client import KazooClient

from zkconsumer.consumer import GroupConsumer, Subscription


def test_owner_created_on_the_new_session_is_not_left_behind(
        dev_broker: Any, zk_client: KazooClient, zk_expire: Callable[..., int],
        make_consumer: Callable[..., GroupConsumer]) -> None:
    b = dev_broker(num_partitions=2)
    for p in range(2):
        produce_to(b, "t", p, [b"x"])
    wait_until(lambda: zk_client.exists("/brokers/topics/t/0"), what="topic")
    z = make_consumer(Subscription(topics={"t": 1}), consumer_id="zz")
    assert z.owned_partitions() == {"t": ["0-0", "0-1"]}
    old_session = z.session.session_id
    scala = ScalaMember(zk_client, GROUP, "scala", topics={"t": 1})  # sorts before g1_zz
    ghost_path = f"/consumers/{GROUP}/owners/t/0-0"
    planted = threading.Event()

    class PlantGhost:
        """Runs on the coordinator thread when it learns of the expiry, before recovery: the
        state a claim retried across the expiry leaves behind, while a Scala member joins."""

        def on_state(self, state: str) -> None:
            if state != "SESSION_LOST" or planted.is_set():
                return
            wait_until(lambda: z.session.connected and z.session.session_id != old_session,
                       what="new session")
            scala.register()
            z.session.client.create(ghost_path, b"g1_zz-0", ephemeral=True)
            planted.set()

    z.add_listener(PlantGhost())
    zk_expire(z.session)
    wait_until(planted.is_set, what="ghost planted")
    wait_until(lambda: z.stats.session_expirations == 1 and z.state == "STABLE"
               and z.owned_partitions() == {"t": ["0-1"]}, what="z rejoined with 0-1")
    # The Scala member's share is 0-0: it must be able to claim it.
    assert scala.rebalance_until() == {("t", "0-0"): "g1_scala-0"}
    assert owners(zk_client, GROUP, "t") == {"0-0": "g1_scala-0", "0-1": "g1_zz-0"}
