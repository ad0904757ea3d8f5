"""Cooperative "threads" for simulated processes written as generators.

A Scala 0.7.2 consumer is a handful of threads making *blocking* ZooKeeper calls (zkclient's
event thread, the watcher executor, the autocommit scheduler, the main thread).  Here each
is a generator that yields what it blocks on, and `Threads` resumes it when that happens:

* a `ZkRequest` -> resumed with its `ZkReply`;
* a ``float`` -> resumed ``None`` after sleeping that many seconds;
* `WAIT_CONNECTED` -> resumed once the ZooKeeper client is connected;
* a `Lock` -> resumed holding it (FIFO among waiters); release with `Lock.release`;
* a `Signal` -> resumed once it is set (and it is cleared for the waiter).

Everything runs on the owner's `Process`, so a paused process's threads stop and a killed
one's never run again.  A thread ends when its generator returns (``on_exit`` is called
with the return value) or raises (``on_exit`` with the exception).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from zkconsumer.consumer.member_commands import ZkRequest
from zkconsumer.consumer.member_events import ZkReply
from zkconsumer.sim.client import ZkClient
from zkconsumer.sim.loop import Loop, Process

__all__ = ["WAIT_CONNECTED", "Lock", "Signal", "Step", "Thread", "Threads"]

WAIT_CONNECTED = object()

#: A thread body: yields what it waits for, is sent what it got.
Step = Generator[Any, Any, Any]


class Thread:
    __slots__ = ("alive", "body", "name", "on_exit")

    def __init__(self, name: str, body: Step, on_exit: Callable[[Any], None] | None) -> None:
        self.name = name
        self.body = body
        self.on_exit = on_exit
        self.alive = True


class Lock:
    """A mutex (Scala's ``rebalanceLock``)."""

    __slots__ = ("_threads", "owner", "waiters")

    def __init__(self, threads: Threads) -> None:
        self.owner: Thread | None = None
        self.waiters: deque[Thread] = deque()
        self._threads = threads

    def release(self) -> None:
        self.owner = None
        while self.waiters:
            nxt = self.waiters.popleft()
            if nxt.alive:
                self.owner = nxt
                self._threads.resume_soon(nxt, None)
                return


class Signal:
    """A flag one thread waits on (Scala's ``isWatcherTriggered`` + condition)."""

    __slots__ = ("_threads", "is_set", "waiter")

    def __init__(self, threads: Threads) -> None:
        self.is_set = False
        self.waiter: Thread | None = None
        self._threads = threads

    def set(self) -> None:
        self.is_set = True
        if self.waiter is not None:
            waiter, self.waiter = self.waiter, None
            self.is_set = False
            self._threads.resume_soon(waiter, None)


class Threads:
    """The scheduler of one process's generator threads."""

    def __init__(self, loop: Loop, proc: Process) -> None:
        self.loop = loop
        self.proc = proc
        self.client: ZkClient | None = None
        self._replies: dict[int, Thread] = {}
        self._want_connected: list[Thread] = []
        self._next_req = 0

    def req(self) -> int:
        """A fresh request id for this process."""
        self._next_req += 1
        return self._next_req

    def spawn(self, name: str, body: Step, on_exit: Callable[[Any], None] | None = None
              ) -> Thread:
        thread = Thread(name, body, on_exit)
        self.resume_soon(thread, None)
        return thread

    def resume_soon(self, thread: Thread, value: Any) -> None:
        if self.proc.dead:
            return  # e.g. a dead process's generator closed by the garbage collector
        self.loop.at(self.loop.now, self._advance, thread, value, proc=self.proc)

    def stop_all(self) -> None:
        for thread in list(self._replies.values()) + self._want_connected:
            thread.alive = False
        self._replies.clear()
        self._want_connected.clear()

    def on_reply(self, reply: ZkReply) -> None:
        thread = self._replies.pop(reply.req, None)
        if thread is not None:
            self._advance(thread, reply)

    def on_connected(self) -> None:
        waiting, self._want_connected = self._want_connected, []
        for thread in waiting:
            self._advance(thread, None)

    def _advance(self, thread: Thread, value: Any) -> None:
        body = thread.body
        while thread.alive:
            try:
                cmd = body.send(value)
            except StopIteration as stop:
                self._exit(thread, stop.value)
                return
            except Exception as exc:
                self._exit(thread, exc)
                return
            value = None
            if isinstance(cmd, float):
                self.loop.after(cmd, self._advance, thread, None, proc=self.proc)
                return
            if cmd is WAIT_CONNECTED:
                client = self.client
                if client is not None and client.state.value == "CONNECTED" and not client.closed:
                    continue
                self._want_connected.append(thread)
                return
            if isinstance(cmd, Lock):
                if cmd.owner is None:
                    cmd.owner = thread
                    continue
                cmd.waiters.append(thread)
                return
            if isinstance(cmd, Signal):
                if cmd.is_set:
                    cmd.is_set = False
                    continue
                cmd.waiter = thread
                return
            assert isinstance(cmd, ZkRequest) and self.client is not None  # type: ignore[arg-type]
            self._replies[cmd.req] = thread
            self.client.submit(cmd)
            return

    def _exit(self, thread: Thread, result: Any) -> None:
        thread.alive = False
        if thread.on_exit is not None:
            thread.on_exit(result)
