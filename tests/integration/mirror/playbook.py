"""The cut-over playbook of docs/migration.md as data: its steps' ``sh`` and ``python`` blocks,
and a runner for the ``sh`` commands with the test's addresses substituted.

`test_playbook.py` runs these blocks -- not copies of them -- so the documentation cannot
drift from what works.  Substitutions: ``$ZK`` and ``$TARGET`` are environment variables
(set to the test's ZooKeeper chroot and tansu), ``--metrics-port 93xx`` becomes a free port
(``0``), and in Python blocks ``kafka1:9092`` becomes tansu's address.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from mirror_helpers import REPO

PLAYBOOK = REPO / "docs" / "migration.md"
SECTION = "## Cut-over playbook"
_STEP = re.compile(r"^(\d+)\. \*\*")
_FENCE = re.compile(r"^\s*```(\w*)\s*$")


@dataclass
class Step:
    sh: list[str] = field(default_factory=list)  # one command per entry (continuations joined)
    python: list[str] = field(default_factory=list)


def read_playbook(path: Path = PLAYBOOK) -> dict[int, Step]:
    """``{step number: Step}`` of the playbook section."""
    text = path.read_text()
    lines = text[text.index(SECTION):].splitlines()
    steps: dict[int, Step] = {}
    step: Step | None = None
    block: list[str] | None = None
    kind = ""
    for line in lines:
        fence = _FENCE.match(line)
        if block is not None:
            if fence:
                if step is not None and kind == "sh":
                    step.sh += _commands(block)
                elif step is not None and kind == "python":
                    step.python.append(textwrap.dedent("\n".join(block) + "\n"))
                block = None
            else:
                block.append(line)
            continue
        if fence:
            block, kind = [], fence.group(1)
            continue
        match = _STEP.match(line)
        if match:
            step = steps.setdefault(int(match.group(1)), Step())
    return steps


def _commands(block: list[str]) -> list[str]:
    indent = min(len(x) - len(x.lstrip()) for x in block if x.strip())
    out: list[str] = []
    pending = ""
    for raw in block:
        line = raw[indent:].rstrip()
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        if pending + line:
            out.append(" ".join((pending + line).split()))
        pending = ""
    return out


def python_block(code: str, bootstrap: str) -> str:
    return code.replace("kafka1:9092", bootstrap)


class Shell:
    """Runs playbook commands with bash, as an operator would, in ``cwd``."""

    def __init__(self, cwd: Path, zk: str, target: str) -> None:
        self.cwd = cwd
        self.env = dict(os.environ, ZK=zk, TARGET=target,
                        PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
                        PYTHONPATH=str(REPO))
        self.started: list[subprocess.Popen[bytes]] = []
        self._logs = 0

    @staticmethod
    def _substituted(command: str) -> str:
        return re.sub(r"--metrics-port 93\d\d", "--metrics-port 0", command)

    def run(self, command: str, *, expect: int = 0) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["bash", "-c", self._substituted(command)], env=self.env,
                              cwd=self.cwd, capture_output=True, text=True, timeout=600)
        assert done.returncode == expect, (command, done.returncode, done.stdout,
                                           done.stderr[-3000:])
        return done

    def start(self, command: str) -> subprocess.Popen[bytes]:
        """A long-running command (mirror, bridge) in the background; stderr to a file."""
        self._logs += 1
        log = self.cwd / f"process-{self._logs}.log"
        with open(log, "wb") as err:
            proc = subprocess.Popen(["bash", "-c", "exec " + self._substituted(command)],
                                    env=self.env, cwd=self.cwd, stdout=subprocess.DEVNULL,
                                    stderr=err)
        proc.log = log  # type: ignore[attr-defined]
        self.started.append(proc)
        return proc

    @staticmethod
    def terminate(proc: subprocess.Popen[bytes]) -> None:
        """SIGTERM (a clean stop) and wait; the process must exit 0."""
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
        assert code == 0, (code, proc.log.read_text()[-3000:])  # type: ignore[attr-defined]

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
