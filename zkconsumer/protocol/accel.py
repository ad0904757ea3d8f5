"""Which message-set decoder is active: the compiled walk or the pure-Python reference.

``zkconsumer/protocol/_speedups.c`` is an optional CPython extension, built at install time
(``pip install -e .``, configured in pyproject.toml's ``ext-modules`` as optional): when the
machine has no C compiler or Python headers the install still succeeds and the pure-Python
decoder runs.  Setting the environment variable ``ZKCONSUMER_PURE=1`` (any value but empty or
``0``) forces the pure path, e.g. to compare the two or to rule the extension out.

Invariants
    * Both paths produce identical results and identical errors (class, text and ``offset``);
      tests/unit/protocol runs the whole codec suite against each of them.
    * The extension is used only if its ``API_VERSION`` matches `API_VERSION`: a stale ``.so``
      left by an older editable install (the build does not re-run when the C file changes)
      is ignored instead of being trusted.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["API_VERSION", "IMPLEMENTATION", "REASON", "load"]

#: The extension interface this Python code expects (``_speedups.API_VERSION``).
API_VERSION = 3


def load() -> tuple[ModuleType | None, str]:
    """``(module, reason)``: the usable extension or None, and why (for humans)."""
    if os.environ.get("ZKCONSUMER_PURE", "") not in ("", "0"):
        return None, "ZKCONSUMER_PURE is set"
    try:
        _speedups = importlib.import_module("zkconsumer.protocol._speedups")
    except ModuleNotFoundError:
        return None, ("the compiled decoder is not built (pip install -e . builds it when a C "
                      "compiler and the Python headers are installed: see .ci/setup)")
    except ImportError as exc:  # built but unloadable (e.g. for another Python)
        return None, f"the compiled decoder does not load: {exc}"
    version = getattr(_speedups, "API_VERSION", None)
    if version != API_VERSION:
        return None, (f"stale compiled decoder {_speedups.__file__} (API {version}, expected "
                      f"{API_VERSION}): reinstall with pip install -e .")
    return _speedups, f"compiled decoder {_speedups.__file__}"


_module, REASON = load()
#: ``"compiled"`` or ``"pure"``: the decoder `decode_message_set` uses by default in this
#: process (``messageset.active_decoder()`` says what it uses right now).
IMPLEMENTATION = "compiled" if _module is not None else "pure"
speedups: ModuleType | None = _module

