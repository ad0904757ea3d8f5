"""The soak directory: opt-in for the ``soak`` marker (registered in pyproject.toml).

Tests marked ``soak`` are the long, on-demand variants (many seeds, minutes each).  They are
deselected unless the marker expression asks for them: ``pytest -m soak`` (or any ``-m``
expression naming ``soak``).  The bounded soak in this directory carries no ``soak`` marker,
so the default test command runs it.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # deselected, not skipped: the default run does not carry them as skipped tests (the
    # bounded soak stands for them there); -m soak selects them
    if "soak" in (config.getoption("markexpr") or ""):
        return
    long_ones = [item for item in items if item.get_closest_marker("soak") is not None]
    if long_ones:
        config.hook.pytest_deselected(items=long_ones)
        items[:] = [item for item in items if item.get_closest_marker("soak") is None]
