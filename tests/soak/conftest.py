"""The soak directory: opt-in for the ``soak`` marker (registered in pyproject.toml).

Tests marked ``soak`` are the long, on-demand variants (many seeds, minutes each).  They are
skipped unless the marker expression asks for them: ``pytest -m soak`` (or any ``-m``
expression naming ``soak``).  The bounded soak in this directory carries no ``soak`` marker,
so the default test command runs it.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "soak" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="long soak: run with pytest -m soak")
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(skip)
