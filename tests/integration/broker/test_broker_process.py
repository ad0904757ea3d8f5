"""The broker as a real process: SIGTERM deregisters cleanly, SIGKILL loses nothing flushed."""

from __future__ import annotations

import subprocess
import sys

from broker_wire import Wire
from fixtures.waiting import wait_until

from zkconsumer.protocol import encode_message_set

MSG = encode_message_set([b"0123456789"])


def test_sigterm_flushes_deregisters_and_exits_0(broker_process, zk_client):
    p = broker_process(4, num_partitions=2, flush_interval=1000, flush_interval_ms=10**7)
    assert zk_client.exists("/brokers/ids/4")
    with Wire(p.host, p.port) as w:
        w.produce("t", 1, MSG + MSG)
        assert w.end("t", 1) == 0  # not flushed yet (1000 messages / 10**7 ms)
    wait_until(lambda: zk_client.exists("/brokers/topics/t/4"), what="topic registration")
    assert p.terminate() == 0
    # the session was closed before exit: the ephemeral znodes are gone at once
    assert zk_client.exists("/brokers/ids/4") is None
    assert zk_client.exists("/brokers/topics/t/4") is None
    assert (p.log_dir / ".kafka_cleanshutdown").exists()
    assert (p.log_dir / "t-1" / "00000000000000000000.kafka").read_bytes() == MSG + MSG
    assert "broker 4 stopped" in p.log_tail()


def test_kill_9_then_restart_recovers_the_log(broker_process, zk_client):
    p = broker_process(zk_session_timeout_ms=1500, registration_wait_ms=20000)
    with Wire(p.host, p.port) as w:
        for _ in range(3):
            w.produce("t", 0, MSG)
        assert w.end("t", 0) == 60
    assert p.kill() == -9
    # the dead broker's session lingers until it times out, then its znode goes
    assert not (p.log_dir / ".kafka_cleanshutdown").exists()
    with open(p.log_dir / "t-0" / "00000000000000000000.kafka", "ab") as f:
        f.write(MSG[:11])  # a torn write the crash left behind
    p2 = broker_process.restart(p)
    assert p2.port == p.port
    with Wire(p2.host, p2.port) as w:
        assert w.end("t", 0) == 60  # torn tail truncated at recovery
        assert w.fetch("t", 0, 0).messages == MSG * 3
    assert zk_client.get("/brokers/ids/0")[0].endswith(f":127.0.0.1:{p2.port}".encode())
    assert zk_client.exists("/brokers/topics/t/0")


def test_cli_rejects_bad_configuration_naming_the_key(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("brokerid=1\nlog.dir=%s\nlog.file.size=3\n" % (tmp_path / "logs"))
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "broker", "--config",
                           str(props), "--port", "0"], capture_output=True, text=True,
                          timeout=60, cwd=str(tmp_path),
                          env={"PYTHONPATH": str(_repo_root())})
    assert proc.returncode == 1
    assert "log.file.size" in proc.stderr


def _repo_root():
    from pathlib import Path

    import zkconsumer

    return Path(zkconsumer.__file__).resolve().parent.parent
