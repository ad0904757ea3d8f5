"""Every codec test here runs twice: on the compiled decoder and on the pure-Python one.

The module-scoped, parametrized, autouse `decoder` fixture switches
``zkconsumer.protocol.messageset._speedups`` (what `decode_message_set` and `decode_batch`
dispatch on) for a whole test module at a time; it is module-scoped so hypothesis tests may use
it.  When the extension is not built (no C compiler on the machine, or ``ZKCONSUMER_PURE=1``)
only the pure half runs, and the end of the run says which decoder(s) ran and why.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from zkconsumer.protocol import accel, messageset

_RAN: set[str] = set()


#: Without the extension only the pure half exists (test_proto_speedups.py then skips its
#: compiled-only tests with the reason, and the summary line says so).
DECODERS = ["compiled", "pure"] if accel.speedups is not None else ["pure"]


@pytest.fixture(scope="module", params=DECODERS, autouse=True)
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """``"compiled"`` or ``"pure"``: the decoder every test of the module runs against."""
    saved = messageset._speedups
    messageset._speedups = accel.speedups if request.param == "compiled" else None
    _RAN.add(request.param)
    try:
        yield request.param
    finally:
        messageset._speedups = saved


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A module with ``COMPARES_BOTH = True`` switches decoders itself (compiled against pure):
    run it once, under the compiled parametrization (or the pure one if that is all there is)."""
    keep = DECODERS[0]
    dropped = [item for item in items
               if getattr(getattr(item, "module", None), "COMPARES_BOTH", False)
               and getattr(item, "callspec", None) is not None
               and item.callspec.params.get("decoder", keep) != keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item not in dropped]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _RAN:
        ran = " and ".join(sorted(_RAN))
        terminalreporter.write_line(
            f"zkconsumer codec tests ran on the {ran} decoder(s); {accel.REASON}")
