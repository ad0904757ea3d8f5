"""The mirror's end-to-end lag estimate and its --progress line."""

from __future__ import annotations

import io

from zkconsumer.mirror.metrics import MirrorProgress, lag_messages


def test_lag_in_messages_is_in_flight_plus_unread_bytes_at_the_average_size() -> None:
    snap = {"messages": 1000, "log_bytes": 50000, "in_flight": 7}
    assert lag_messages(snap, 5000) == 7 + 100  # 50 log bytes per message
    assert lag_messages(snap, 0) == 7
    assert lag_messages(snap, None) is None
    assert lag_messages({"messages": 0, "log_bytes": 0, "in_flight": 3}, 10) is None


def test_progress_line_shows_transaction_rate_and_lag_in_messages() -> None:
    out = io.StringIO()
    bar = MirrorProgress(out, interval=0.0, force=True)
    text = bar.update({"messages": 1000, "bytes": 10**5, "in_flight": 0, "transactions": 4,
                       "log_bytes": 50000}, 500, 2)
    assert text is not None and "txn/s" in text and "lag 10 msgs" in text
    assert "partitions 2" in out.getvalue()
