"""A reader that closes stdout early (``zkconsumer ... | head``) ends the command quietly.

The dispatcher (`zkconsumer.cli.main`) turns a broken *stdout* into exit status 141 (128 +
SIGPIPE, what a shell reports for ``yes | head``) with nothing on stderr; a broken pipe to
anything else stays an error.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from zkconsumer.broker.log import LogSettings, PartitionLog
from zkconsumer.cli import SIGPIPE_STATUS
from zkconsumer.protocol import encode_message_set

ROOT = Path(__file__).resolve().parents[3]


def _log_dir(tmp_path: Path, messages: int) -> Path:
    part = tmp_path / "logs" / "events-0"
    part.mkdir(parents=True)
    plog = PartitionLog(part, "events", 0, LogSettings(1 << 30, 1, 1 << 40))
    for i in range(0, messages, 1000):
        batch = [f"message {j:08d} ".encode() * 4 for j in range(i, i + 1000)]
        plog.append(encode_message_set(batch), len(batch))
    plog.close()
    return tmp_path / "logs"


def test_head_of_logdir_dump_is_quiet_exit_141(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, 20_000)  # ~1.5 MB of text: far more than a pipe buffer
    proc = subprocess.Popen([sys.executable, "-m", "zkconsumer", "logdir", "dump", str(logs),
                             "--messages"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    assert first.startswith(b"events-0\t0\t")
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == SIGPIPE_STATUS == 141
    assert err == b""


def test_a_whole_dump_still_exits_0(tmp_path: Path) -> None:
    logs = _log_dir(tmp_path, 1000)
    proc = subprocess.run([sys.executable, "-m", "zkconsumer", "logdir", "dump", str(logs)],
                          cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert b"1000 messages" in proc.stdout
