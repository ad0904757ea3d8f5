"""Misbehaving "brokers" on real loopback sockets, and a thread-leak check.

Each server accepts TCP connections on 127.0.0.1 and runs a script per connection: answer
garbage, answer half a frame, or hold the connection open and never answer.  Real sockets,
no mocks: the client code under test sees exactly what a broken broker would send.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

from fixtures.sockets import read_frame

__all__ = ["ScriptedBroker", "blackhole", "no_new_threads", "read_frame", "reply"]


class ScriptedBroker:
    """Accept connections and run ``script(conn)`` on each, on its own thread."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = "127.0.0.1", self.listener.getsockname()[1]
        self.script = script
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._serve, name="scripted-broker", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                self._conns.append(conn)
            threading.Thread(target=self._run, args=(conn,), name="scripted-broker",
                             daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            self.script(conn)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the blocked accept(); close() alone does not
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.close()
        self._thread.join(5)


def reply(answer: bytes, *, close: bool = False) -> Callable[[socket.socket], None]:
    """A script: read one request, send ``answer`` verbatim, then close (``close``) or wait
    for the client to go."""
    def script(conn: socket.socket) -> None:
        read_frame(conn)
        conn.sendall(answer)
        if close:
            conn.close()
            return
        while conn.recv(4096):
            pass
    return script


def blackhole(conn: socket.socket) -> None:
    """A script: read everything, answer nothing (a hung broker)."""
    while conn.recv(65536):
        pass


@contextlib.contextmanager
def no_new_threads() -> Iterator[None]:
    """Assert that the block leaves no thread behind that was not running before it."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()
            and t.name != "scripted-broker"]
    assert not left, f"threads left running: {[t.name for t in left]}"
