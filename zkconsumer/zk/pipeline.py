"""`PipelinedReader`: tens of thousands of znode reads per second on one plain ZooKeeper socket.

Why not kazoo: its connection thread sends one request per wake-up of its select loop (one
wake byte through a socket pair, one ``select``, one ``send`` per request), which caps a
Python process at a few thousand reads a second however many requests are queued -- a
monitor poll of 200 groups x 100 partitions (41,266 reads) took 9.2 s that way and 3.4 s
here, side by side on a loaded 2-core machine (docs/performance.md).  The
ZooKeeper wire protocol itself needs none of that: requests carry an ``xid`` and a server
answers the requests of a session in order, so this reader opens its own short session,
writes a window of requests in one ``sendall`` and parses the answers as they stream back.
Encoding and decoding are kazoo's (`kazoo.protocol.serialization`), so the bytes are the
ones kazoo would send.

Scope, on purpose small: read-only (getData, getChildren without watches), plain TCP and no
authentication (`BulkReader` on the ordinary `ZkSession` is used when TLS or SASL/digest is
configured), one session per use (`open` ... `close`, no pings: the caller reads without
pausing and closes before doing anything slow).

Invariants:

* Results are `ZnodeInfo` / sorted child lists exactly as `ZkSession` returns them; "no node"
  is ``None`` / ``[]``.  Any other error code raises `ZooKeeperError` naming the path.
* A socket failure raises `ZooKeeperError`; the reader is then closed (callers fall back).
* ``reads`` counts the requests sent.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from kazoo.hosts import collect_hosts
from kazoo.protocol.serialization import (
    Close,
    Connect,
    GetChildren,
    GetChildren2,
    GetData,
    ReplyHeader,
)

from zkconsumer.errors import ZooKeeperError
from zkconsumer.zk.bulk import versioned_children
from zkconsumer.zk.session import ZnodeInfo

__all__ = ["PipelinedReader"]

_INT = struct.Struct(">i")
_HEADER = struct.Struct(">ii")  # xid, request type
_NO_NODE = -101
DEFAULT_WINDOW = 1000


class PipelinedReader:
    """``with PipelinedReader(connect) as r: r.nodes(paths); r.children(paths)``."""

    def __init__(self, connect: str, *, timeout: float = 10.0,
                 window: int = DEFAULT_WINDOW) -> None:
        hosts, chroot = collect_hosts(connect)
        self.hosts: list[tuple[str, int]] = list(hosts)
        self.chroot = (chroot or "").rstrip("/")
        self.timeout = timeout
        self.window = max(1, window)
        self.reads = 0
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._pos = 0  # start of the unparsed bytes in _buf
        self._xid = 0

    # ------------------------------------------------------------------------ session

    def open(self) -> PipelinedReader:
        errors = []
        for host, port in random.sample(self.hosts, len(self.hosts)):
            try:
                sock = socket.create_connection((host, port), timeout=self.timeout)
            except OSError as exc:
                errors.append(f"{host}:{port}: {exc}")
                continue
            self._sock = sock
            try:
                hello = Connect(0, 0, int(self.timeout * 1000), 0, b"\x00" * 16, False)
                self._send([bytes(hello.serialize())])
                answer = self._frame()
                connected, _ = Connect.deserialize(answer, 0)
                if connected.session_id == 0 or connected.time_out <= 0:
                    raise ZooKeeperError(f"{host}:{port} refused the session")
                return self
            except (OSError, ZooKeeperError, struct.error) as exc:
                errors.append(f"{host}:{port}: {exc}")
                self._drop()
        raise ZooKeeperError(f"pipelined reader: no ZooKeeper server answered: "
                             f"{'; '.join(errors)}")

    def close(self) -> None:
        if self._sock is None:
            return
        try:  # a polite end: the server drops the session at once instead of timing it out
            self._xid += 1
            self._send([_HEADER.pack(self._xid, Close.type)])
        except OSError:
            pass
        self._drop()

    def __enter__(self) -> PipelinedReader:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self._buf.clear()
        self._pos = 0

    # ------------------------------------------------------------------------ reads

    def children(self, paths: Sequence[str]) -> dict[str, list[str]]:
        """``{path: sorted child names}``; ``[]`` for a znode that does not exist."""
        raw = self._pipeline(paths, GetChildren)
        return {p: sorted(v) if v is not None else [] for p, v in raw.items()}

    def children_versioned(self, paths: Sequence[str]
                           ) -> dict[str, tuple[list[str], tuple[int, int] | None]]:
        """``{path: (sorted children, (czxid, cversion))}``; ``([], None)`` if missing.

        ``(czxid, cversion)`` changes whenever a child is created or deleted (and when the
        znode itself is re-created), so a caller may cache what it read below it."""
        return {path: versioned_children(value)
                for path, value in self._pipeline(paths, GetChildren2).items()}

    def nodes(self, paths: Sequence[str]) -> dict[str, ZnodeInfo | None]:
        """``{path: ZnodeInfo}``; ``None`` for a znode that does not exist."""
        return {path: None if value is None else ZnodeInfo.of(*value)
                for path, value in self._pipeline(paths, GetData).items()}

    def _pipeline(self, paths: Sequence[str], kind: Any) -> dict[str, Any]:
        if self._sock is None:
            raise ZooKeeperError("pipelined reader: not open")
        out: dict[str, Any] = {}
        try:
            for start in range(0, len(paths), self.window):
                chunk = paths[start:start + self.window]
                frames, xids = [], []
                for path in chunk:
                    self._xid += 1
                    xids.append(self._xid)
                    frames.append(_HEADER.pack(self._xid, kind.type)
                                  + bytes(kind(self.chroot + path, False).serialize()))
                self._send(frames)
                self.reads += len(chunk)
                for path, xid in zip(chunk, xids, strict=True):
                    body = self._frame()
                    header, offset = ReplyHeader.deserialize(body, 0)
                    if header.xid != xid:
                        raise ZooKeeperError(f"pipelined reader: answer {header.xid} to "
                                             f"request {xid} ({path})")
                    if header.err == _NO_NODE:
                        out[path] = None
                    elif header.err != 0:
                        raise ZooKeeperError(f"read {path}: ZooKeeper error {header.err}")
                    else:
                        out[path] = kind.deserialize(body, offset)
        except (OSError, struct.error) as exc:
            self._drop()
            raise ZooKeeperError(f"pipelined reader: {exc}") from exc
        except ZooKeeperError:
            self._drop()
            raise
        return out

    # ------------------------------------------------------------------------ framing

    def _send(self, frames: list[bytes]) -> None:
        assert self._sock is not None
        self._sock.sendall(b"".join(_INT.pack(len(f)) + f for f in frames))

    def _frame(self) -> bytes:
        """The next answer (without its length prefix); pings and notifications are not
        expected (no watches, no idle time), so every frame answers a request in order."""
        while True:
            avail = len(self._buf) - self._pos
            if avail >= 4:
                (size,) = _INT.unpack_from(self._buf, self._pos)
                if size < 0 or size > 64 * 1024 * 1024:
                    raise ZooKeeperError(f"pipelined reader: bad frame size {size}")
                if avail >= 4 + size:
                    start = self._pos + 4
                    self._pos = start + size
                    return bytes(self._buf[start:self._pos])
            if self._pos:  # keep only the unparsed tail (once per recv, not per frame)
                del self._buf[:self._pos]
                self._pos = 0
            assert self._sock is not None
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise ZooKeeperError("pipelined reader: the server closed the connection")
            self._buf += chunk
