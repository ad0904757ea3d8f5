"""The package stays ruff-clean and mypy-strict-clean (configuration in pyproject.toml).

Run as tests so CI holds every change to it, not only the ones whose author remembered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "zkconsumer", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
