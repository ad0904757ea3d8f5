"""restartable_port: free, and outside the range outgoing connections take their ports from."""

from __future__ import annotations

import socket

from zkconsumer.devcluster.ports import _ephemeral_low, restartable_port


def test_port_is_free_and_below_the_ephemeral_range() -> None:
    low = _ephemeral_low()
    ports = {restartable_port() for _ in range(20)}
    assert all(10000 <= p < low for p in ports)
    assert len(ports) > 1  # random: parallel runs rarely collide
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", ports.pop()))


def test_outgoing_connections_never_take_it() -> None:
    # what makes a kill -9 + restart on the same port safe: a client's local port is drawn
    # from the ephemeral range, never from below it
    with socket.socket() as server:
        server.bind(("127.0.0.1", restartable_port()))
        server.listen(64)
        clients = [socket.create_connection(server.getsockname()) for _ in range(50)]
        try:
            assert all(c.getsockname()[1] >= _ephemeral_low() for c in clients)
        finally:
            for c in clients:
                c.close()
