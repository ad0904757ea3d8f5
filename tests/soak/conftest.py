"""The soak directory: the ``soak`` marker and its opt-in.

Tests marked ``soak`` are the long, on-demand variants (many seeds, minutes each).  They are
skipped unless the marker expression asks for them: ``pytest -m soak`` (or any ``-m``
expression naming ``soak``).  The bounded soak in this directory carries no marker, so the
default test command runs it.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "soak: long fault-injection soak; run with -m soak")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "soak" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="long soak: run with pytest -m soak")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(skip)
