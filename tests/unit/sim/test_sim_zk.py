"""The in-memory ZooKeeper and its kazoo-like client, tested directly.

The simulator is only as good as its ZooKeeper: these tests pin the semantics the group
protocol relies on (versions and compare-and-set, ephemerals and expiry, one-shot watches,
multi, FIFO replies, connection loss as kazoo reports it, restarts, paused processes).
"""

from __future__ import annotations

from zkconsumer.consumer.member_commands import (
    Create,
    Delete,
    Exists,
    GetChildren,
    GetData,
    Multi,
    SetData,
)
from zkconsumer.consumer.member_events import ConnState, WatchKind, ZkError, ZkReply
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.loop import Loop, Process
from zkconsumer.sim.zk import ZooKeeper


class Sink:
    """A session's client as the server sees it: records what the server tells it."""

    connected = True

    def __init__(self) -> None:
        self.fired: list[tuple[str, WatchKind]] = []
        self.dropped = 0

    def watch_fired(self, path: str, kind: WatchKind) -> None:
        self.fired.append((path, kind))

    def drop(self) -> None:
        self.dropped += 1


def server() -> tuple[Loop, ZooKeeper, int, Sink]:
    loop = Loop(1)
    zk = ZooKeeper(loop)
    sink = Sink()
    return loop, zk, zk.open_session(6.0, sink).id, sink


def test_create_makes_null_parents_and_refuses_duplicates() -> None:
    _, zk, sid, _ = server()
    assert zk.execute(sid, Create(1, "/a/b/c", b"x")).error is None
    assert zk.nodes["/a"].data is None and zk.nodes["/a/b"].data is None
    assert zk.execute(sid, Create(2, "/a/b/c", b"y")).error is ZkError.NODE_EXISTS
    reply = zk.execute(sid, GetData(3, "/a/b/c"))
    assert (reply.data, reply.stat.version if reply.stat else None) == (b"x", 0)
    assert zk.execute(sid, GetChildren(4, "/a/b")).children == ("c",)


def test_versions_and_compare_and_set() -> None:
    _, zk, sid, _ = server()
    zk.execute(sid, Create(1, "/o", b"1"))
    assert zk.execute(sid, SetData(2, "/o", b"2", 0)).stat.version == 1  # type: ignore[union-attr]
    assert zk.execute(sid, SetData(3, "/o", b"3", 0)).error is ZkError.BAD_VERSION
    assert zk.execute(sid, SetData(4, "/o", b"3", -1)).error is None
    assert zk.execute(sid, Delete(5, "/o", 0)).error is ZkError.BAD_VERSION
    assert zk.execute(sid, Delete(6, "/o", 2)).error is None
    assert zk.execute(sid, SetData(7, "/o", b"4")).error is ZkError.NO_NODE
    assert zk.execute(sid, Delete(8, "/o")).error is ZkError.NO_NODE


def test_delete_refuses_a_parent_and_ephemerals_have_no_children() -> None:
    _, zk, sid, _ = server()
    zk.execute(sid, Create(1, "/p/c", b""))
    assert zk.execute(sid, Delete(2, "/p")).error is ZkError.NOT_EMPTY
    zk.execute(sid, Create(3, "/e", b"", ephemeral=True))
    assert zk.execute(sid, Create(4, "/e/x", b"")).error is ZkError.OTHER


def test_ephemerals_vanish_when_the_session_expires_and_watches_fire() -> None:
    loop, zk, sid, sink = server()
    other = zk.open_session(6.0, Sink())
    zk.execute(sid, Create(1, "/g/ids/me", b"", ephemeral=True))
    zk.execute(other.id, GetChildren(2, "/g/ids", watch=True))
    zk.silent(zk.sessions[sid])
    loop.run_until(5.9)
    assert "/g/ids/me" in zk.nodes
    loop.run_until(6.1)
    assert "/g/ids/me" not in zk.nodes and not zk.sessions[sid].alive
    assert other.sink.fired == [("/g/ids", WatchKind.CHILDREN)]  # type: ignore[union-attr]
    assert sink.dropped == 1  # the server closes the expired session's connection
    assert zk.execute(sid, GetData(3, "/g")).error is ZkError.SESSION_EXPIRED


def test_touch_cancels_the_expiry() -> None:
    loop, zk, sid, _ = server()
    zk.execute(sid, Create(1, "/e", b"", ephemeral=True))
    zk.silent(zk.sessions[sid])
    loop.run_until(3.0)
    zk.touch(zk.sessions[sid])
    loop.run_until(20.0)
    assert "/e" in zk.nodes


def test_watches_are_one_shot_and_per_kind() -> None:
    _, zk, sid, sink = server()
    zk.execute(sid, GetChildren(1, "/missing", watch=True))  # existence watch, fires on create
    zk.execute(sid, Create(2, "/missing", b""))
    assert sink.fired == [("/missing", WatchKind.CHILDREN)]
    zk.execute(sid, GetChildren(3, "/missing", watch=True))
    zk.execute(sid, GetChildren(4, "/missing", watch=True))  # deduplicated per session
    zk.execute(sid, Create(5, "/missing/a", b""))
    zk.execute(sid, Create(6, "/missing/b", b""))  # the watch was used up
    assert sink.fired[1:] == [("/missing", WatchKind.CHILDREN)]
    zk.execute(sid, Exists(7, "/missing/a", watch=True))
    zk.execute(sid, SetData(8, "/missing/a", b"v"))
    assert sink.fired[2:] == [("/missing/a", WatchKind.EXISTS)]
    zk.execute(sid, GetData(9, "/missing/a"))  # GetData arms nothing
    zk.execute(sid, SetData(10, "/missing/a", b"w"))
    assert len(sink.fired) == 3


def test_dropped_watches_never_fire() -> None:
    _, zk, sid, sink = server()
    zk.execute(sid, GetChildren(1, "/", watch=True))
    zk.drop_watches(sid)
    zk.execute(sid, Create(2, "/x", b""))
    assert sink.fired == [] and not zk.watched(sid, "/")


def test_multi_is_all_or_nothing() -> None:
    _, zk, sid, sink = server()
    zk.execute(sid, Create(1, "/o/a", b""))
    zk.execute(sid, GetChildren(2, "/o", watch=True))
    reply = zk.execute(sid, Multi(3, (Create(0, "/o/b", b"1", ephemeral=True),
                                      SetData(0, "/o/a", b"2", 0),
                                      Create(0, "/o/a", b"3"))))
    assert reply.error is ZkError.NODE_EXISTS
    assert "/o/b" not in zk.nodes and zk.nodes["/o/a"].data == b""
    assert zk.nodes["/o/a"].version == 0 and not zk.sessions[sid].ephemerals
    assert sink.fired == []
    assert zk.execute(sid, Multi(4, (Create(0, "/o/b", b"1"), Delete(0, "/o/a")))).error is None
    assert sorted(zk.nodes["/o"].children) == ["b"]
    assert sink.fired == [("/o", WatchKind.CHILDREN)]


# -- the client ----------------------------------------------------------------------------


class Recorder:
    """A process with a client, recording everything the client hands it."""

    def __init__(self, loop: Loop, zk: ZooKeeper, name: str = "p") -> None:
        self.proc = Process(name)
        self.seen: list[object] = []
        self.client = ZkClient(zk, self.proc, 6.0, self.seen.append,
                               lambda path, kind: self.seen.append(("watch", path)),
                               lambda state, sid: self.seen.append((state, sid)))

    def replies(self) -> list[ZkReply]:
        return [x for x in self.seen if isinstance(x, ZkReply)]


def connected(seed: int = 3) -> tuple[Loop, ZooKeeper, Recorder]:
    loop = Loop(seed)
    zk = ZooKeeper(loop)
    rec = Recorder(loop, zk)
    rec.client.connect()
    loop.run_until(1.0)
    assert rec.client.connected
    rec.seen.clear()
    return loop, zk, rec


def test_replies_come_back_in_order_with_varying_latency() -> None:
    loop, _, rec = connected()
    for i in range(200):
        rec.client.submit(Create(i, f"/n{i}", b""))
    loop.run_until(5.0)
    assert [r.req for r in rec.replies()] == list(range(200))


def test_a_change_notification_precedes_a_later_read_showing_it() -> None:
    loop, zk, rec = connected()
    writer = Recorder(loop, zk, "w")
    writer.client.connect()
    loop.run_until(1.5)
    rec.client.submit(GetChildren(1, "/", watch=True))
    loop.run_until(2.0)
    writer.client.submit(Create(1, "/new", b""))
    while "/new" not in zk.nodes:  # the change happened on the server ...
        loop.run_until(loop.now + 0.00001)
    rec.client.submit(GetChildren(2, "/"))  # ... before this read, which must see it
    loop.run_until(3.0)
    kinds = [x if not isinstance(x, ZkReply) else x.req for x in rec.seen]
    assert "new" in rec.replies()[-1].children  # type: ignore[operator]
    assert kinds.index(("watch", "/")) < kinds.index(2)


def test_a_blip_answers_pending_requests_with_connection_loss_and_keeps_the_session() -> None:
    loop, zk, rec = connected()
    sid = rec.client.session.id  # type: ignore[union-attr]
    rec.client.submit(GetChildren(1, "/", watch=True))
    loop.run_until(1.5)
    rec.seen.clear()
    rec.client.submit(Create(2, "/x", b"", ephemeral=True))
    rec.client.net_down = True
    rec.client.drop()
    loop.run_until(3.0)
    assert rec.seen[:2] == [ZkReply(2, ZkError.CONNECTION_LOSS), (ConnState.SUSPENDED, sid)]
    rec.client.submit(GetData(3, "/x"))  # waits for the reconnect
    zk.execute(zk.open_session(6.0, None).id, Create(0, "/y", b""))
    rec.client.net_down = False
    loop.run_until(5.0)
    assert (ConnState.CONNECTED, sid) in rec.seen
    assert ("watch", "/") not in rec.seen  # the watch was lost with the connection
    assert rec.replies()[-1].req == 3


def test_an_expiry_during_the_outage_is_reported_lost_then_a_new_session() -> None:
    loop, zk, rec = connected()
    old = rec.client.session
    assert old is not None
    rec.client.submit(Create(1, "/e", b"", ephemeral=True))
    loop.run_until(1.5)
    rec.client.net_down = True
    rec.client.drop()
    loop.run_until(7.8)
    assert not old.alive and "/e" not in zk.nodes
    rec.client.submit(GetData(2, "/e"))
    rec.client.net_down = False
    loop.run_until(10.0)
    states = [x for x in rec.seen if isinstance(x, tuple) and isinstance(x[0], ConnState)]
    new = rec.client.session
    assert new is not None and new.id != old.id
    assert states == [(ConnState.SUSPENDED, old.id), (ConnState.LOST, None),
                      (ConnState.CONNECTED, new.id)]
    assert ZkReply(2, ZkError.SESSION_EXPIRED) in rec.seen


def test_a_restart_keeps_sessions_that_reconnect_in_time() -> None:
    loop, zk, rec = connected()
    sid = rec.client.session.id  # type: ignore[union-attr]
    rec.client.submit(Create(1, "/e", b"", ephemeral=True))
    loop.run_until(1.5)
    zk.stop()
    loop.run_until(11.0)  # longer than the timeout: nothing expires while down
    zk.start()
    loop.run_until(12.0)
    assert rec.client.session.id == sid and "/e" in zk.nodes  # type: ignore[union-attr]
    assert (ConnState.CONNECTED, sid) in rec.seen


def test_a_paused_process_gets_what_fell_due_at_wake_up_in_order() -> None:
    loop, _, rec = connected()
    for i in range(5):
        rec.client.submit(Create(i, f"/p{i}", b""))
    loop.pause(rec.proc)
    loop.run_until(3.0)
    assert rec.replies() == []
    loop.wake(rec.proc)
    loop.run_until(3.0)
    assert [r.req for r in rec.replies()] == list(range(5))
    assert rec.proc.woke_at == 3.0


def test_a_killed_process_gets_nothing_and_its_session_times_out() -> None:
    loop, zk, rec = connected()
    rec.client.submit(Create(1, "/e", b"", ephemeral=True))
    loop.run_until(1.5)
    rec.seen.clear()
    loop.kill(rec.proc)
    rec.client.vanish()
    rec.client.submit(GetData(2, "/e"))
    loop.run_until(20.0)
    assert rec.replies() == [] and "/e" not in zk.nodes
