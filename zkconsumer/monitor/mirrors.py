"""``--mirror GROUP=URL``: a mirror's target side, read from the mirror process's /metrics.

A mirror (`zkconsumer mirror`, 0.7 -> modern Kafka or 0.7) consumes as an ordinary 0.7 group,
so the poll sees its *source* progress (committed offsets against log ends) like any group's.
Its *target* is not in the 0.7 ZooKeeper; the mirror process itself counts what the target
acknowledged and exports it (``--metrics-port``; `zkconsumer.mirror.metrics`).  Given that
URL, the monitor reads a few of those series after each poll and shows them beside the
group: messages and bytes acknowledged by the target, messages in flight, the end-to-end lag
in messages, target errors, and whether the target accepts writes.  It parses the Prometheus
text format only -- no import of the mirror package, and it works for a mirror on another
host.

Invariants: one GET per mirror per poll, bounded by ``timeout``; a mirror that does not
answer is that group's note (``target.error``), never a failed poll.
"""

from __future__ import annotations

import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["TARGET_SERIES", "read_target"]

#: mirror metric family -> key in the group's ``target`` object (counters summed over labels)
TARGET_SERIES = {
    "zkconsumer_mirror_messages": "messages",
    "zkconsumer_mirror_bytes": "bytes",
    "zkconsumer_mirror_in_flight": "in_flight",
    "zkconsumer_mirror_lag_messages": "lag_messages",
    "zkconsumer_mirror_target_errors": "target_errors",
    "zkconsumer_mirror_transactions": "transactions",
    "zkconsumer_mirror_healthy": "healthy",
}


def read_target(url: str, timeout: float = 2.0) -> dict[str, Any]:
    """``{"url", "messages", "bytes", ...}`` from the mirror at ``url``, or ``{"url",
    "error"}`` when it does not answer (stopped, wrong port) or answers garbage."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode("utf-8", "replace")
        out: dict[str, Any] = {"url": url}
        for family in text_string_to_metric_families(text):
            key = TARGET_SERIES.get(family.name)
            if key is None:
                continue
            total = sum(s.value for s in family.samples
                        if s.name in (family.name, family.name + "_total"))
            out[key] = int(total) if float(total).is_integer() else total
        return out
    except (OSError, ValueError) as exc:
        return {"url": url, "error": f"mirror metrics unreadable: {exc}"}
