"""``--notify-url``: a JSON POST per status change of a group, retried with backoff when the
receiver fails, while polling goes on (a receiver that hangs does not stop the monitor)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fixtures.waiting import wait_until
from monitor_helpers import produce_to, running_monitor, scala_commit, scala_member, scala_owner

from zkconsumer.monitor.notifier import Notifier, redact_url

pytestmark = pytest.mark.slow


class Receiver:
    """A webhook receiver on 127.0.0.1: fails the first ``fail`` POSTs with 503, and holds
    every request while ``gate`` is clear."""

    def __init__(self, fail: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        self.fail = fail
        self.gate = threading.Event()
        self.gate.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.gate.wait(30)
                outer.attempts += 1
                if outer.attempts <= outer.fail:
                    self.send_response(503)
                else:
                    outer.bodies.append(json.loads(body))
                    self.send_response(204)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=s3cret"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver(fail=2)
    yield r
    r.close()


def test_status_changes_are_posted_with_retries_and_never_block_polling(
        zk_connect: str, zk_client: Any, dev_broker: Any, receiver: Receiver,
        caplog: pytest.LogCaptureFixture) -> None:
    end = produce_to(dev_broker(num_partitions=1), "t", 0, 1)  # the broker registers topic t
    scala_member(zk_client, "g", "c1", {"t": 1})
    scala_owner(zk_client, "g", "t", "0-0", "c1-0")
    scala_commit(zk_client, "g", "t", "0-0", end)  # caught up: OK until the owner goes
    notifier = Notifier(receiver.url, backoff_initial=0.05, backoff_max=0.2)
    try:
        with running_monitor(zk_connect, on_change=notifier.notify) as mon:
            wait_until(lambda: receiver.bodies, what="first notification")
            first = receiver.bodies[0]
            assert receiver.attempts == 3  # two 503s, then accepted
            assert (first["group"], first["previous"]) == ("g", None)
            assert first["status"] == "OK"

            receiver.gate.clear()  # the receiver hangs from now on
            zk_client.delete("/consumers/g/owners/t/0-0")  # a member that lost its partition
            polls = mon.monitor.state.polls
            wait_until(lambda: mon.monitor.state.polls >= polls + 5, what="polling goes on")
            mon.wait_status("g", "ERR")
            receiver.gate.set()
            wait_until(lambda: any(b["status"] == "ERR" for b in receiver.bodies),
                       what="ERR notification")
            err = next(b for b in receiver.bodies if b["status"] == "ERR")
            assert err["previous"] == first["status"]
            assert any("has no owner" in r for r in err["reasons"])
    finally:
        notifier.close()
    assert "s3cret" not in caplog.text
    assert redact_url("https://user:pw@hooks.example:8443/x?token=1") == \
        "https://hooks.example:8443/x"
