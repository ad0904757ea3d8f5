"""``--progress``: one live status line on stderr, rewritten in place about once a second.

Shown only when stderr is a terminal (a redirected log must not fill with carriage returns),
and kept out of the logging system for the same reason.  Rates are computed over the last
interval from monotonically growing totals, so the line costs nothing on the hot path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["Progress", "format_bytes"]


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover - unreachable


class Progress:
    """Call `update` often; it writes at most once per ``interval`` seconds."""

    def __init__(self, stream: TextIO, *, interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, force: bool = False) -> None:
        self._stream = stream
        self._interval = interval
        self._clock = clock
        self.enabled = force or _isatty(stream)
        self._last_time = clock()
        self._last_messages = 0
        self._last_bytes = 0
        self._shown = False

    def update(self, messages: int, nbytes: int, lag: int | None, owned: int,
               inflight: int) -> str | None:
        """Redraw the line if due; returns the text written (for tests), else None."""
        if not self.enabled:
            return None
        now = self._clock()
        elapsed = now - self._last_time
        if elapsed < self._interval:
            return None
        rate = (messages - self._last_messages) / elapsed
        brate = (nbytes - self._last_bytes) / elapsed
        self._last_time, self._last_messages, self._last_bytes = now, messages, nbytes
        lag_text = format_bytes(lag) if lag is not None else "?"
        text = (f"{rate:,.0f} msg/s  {format_bytes(brate)}/s  lag {lag_text}  "
                f"partitions {owned}  in-flight {inflight}  total {messages:,}")
        self._stream.write("\r" + text + "\x1b[K")
        self._stream.flush()
        self._shown = True
        return text

    def finish(self) -> None:
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()
            self._shown = False


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
