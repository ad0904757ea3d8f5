"""The dev broker process keeps freed memory for reuse (`zkconsumer.broker.cli.hold_freed_memory`):
on glibc both malloc settings take (a wrong signature or parameter would leave every large
produce request faulted in page by page again, silently).  The call runs in a child process:
it changes the whole process's malloc.
"""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_both_settings() -> None:
    out = subprocess.run(
        [sys.executable, "-c",
         "from zkconsumer.broker.cli import hold_freed_memory; print(hold_freed_memory())"],
        capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True"
