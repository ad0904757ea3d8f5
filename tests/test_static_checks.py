"""The package stays ruff-clean and mypy-strict-clean (configuration in pyproject.toml).

Run as tests so CI holds every change to it, not only the ones whose author remembered.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def test_ruff_is_clean() -> None:
    result = _run("ruff", "check", "zkconsumer", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


# --- layering (docs/architecture.md), checked from the imports ------------------------------

PACKAGE = ROOT / "zkconsumer"

#: Each part of zkconsumer (a top-level module or package) and the parts it may import
#: directly; what those may import is allowed too (the table is closed transitively below).
#: This is the diagram of docs/architecture.md: a new package needs a row here and there.
#: The root package (``zkconsumer/__init__.py``: the version) may be imported by anyone.
DEPENDS_ON: dict[str, set[str]] = {
    "errors": set(),
    "extras": {"errors"},  # which pip extra a feature needs (zkconsumer/extras.py)
    "backoff": {"errors"},
    "properties": {"errors"},
    "telemetry": {"errors"},
    "protocol": {"errors"},
    "zk": {"errors", "backoff"},
    "client": {"protocol", "backoff"},
    "producer": {"client", "zk", "properties"},
    "consumer": {"client", "zk", "properties"},
    "broker": {"protocol", "zk", "properties"},
    "daemon": {"producer", "consumer", "telemetry"},
    "migrate": {"producer", "consumer"},
    "spark": {"producer", "consumer", "extras"},
    "mirror": {"producer", "consumer", "telemetry", "extras"},
    "monitor": {"producer", "consumer", "telemetry"},
    "sim": {"consumer"},
    "devcluster": {"broker", "producer", "consumer", "monitor"},
    "bench": {"devcluster", "daemon", "migrate", "spark", "mirror", "monitor", "sim"},
    "cli": {"errors", "extras"},  # commands are imported by name (importlib), never statically
    "__main__": {"cli"},
}

#: Third-party modules only one part may import (the others go through it).
ONLY_IN = {"kazoo": "zk", "pyspark": "spark"}
#: The protocol layer is sans-I/O.
NOT_IN_PROTOCOL = {"socket", "select", "selectors", "threading", "time", "asyncio"}


def _closure(table: dict[str, set[str]]) -> dict[str, set[str]]:
    closed = {part: set(deps) for part, deps in table.items()}
    changed = True
    while changed:
        changed = False
        for deps in closed.values():
            more = set().union(*(closed.get(d, set()) for d in deps)) - deps
            if more:
                deps |= more
                changed = True
    return closed


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, list[tuple[str, int]]]:
    """``module -> [(imported module, line)]`` for every import statement of the package,
    including the ones inside functions and under ``TYPE_CHECKING`` (a lazy import is still
    a dependency).  ``from pkg import name`` counts as ``pkg.name`` when that is a module."""
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    found: dict[str, list[tuple[str, int]]] = {}
    for path in files:
        name = _module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out = found.setdefault(name, [])
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.extend((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    out.append((sub if sub in modules else target, node.lineno))
    return {name: list(dict.fromkeys(imports)) for name, imports in found.items()}


def _part(module: str) -> str:
    """``zkconsumer.client.simple`` -> ``client``; the root package -> ``""``."""
    return module.split(".")[1] if "." in module else ""


def test_every_import_follows_the_layers() -> None:
    allowed = _closure(DEPENDS_ON)
    wrong = []
    for module, imports in sorted(_imports().items()):
        part = _part(module)
        if part not in allowed and part != "":
            wrong.append(f"{module}: zkconsumer.{part} is not in the layering table "
                         "(tests/test_static_checks.py DEPENDS_ON and docs/architecture.md)")
            continue
        for target, line in imports:
            top = target.split(".")[0]
            if top == "zkconsumer":
                other = _part(target)
                if other == part or (other == "" and part != ""):
                    continue  # itself, or the root package (which imports nothing)
                if part == "" or other not in allowed[part]:
                    wrong.append(f"{module}:{line} imports {target} ({part or 'root'} may "
                                 f"not depend on {other or 'root'})")
            elif top in ONLY_IN and ONLY_IN[top] != part:
                wrong.append(f"{module}:{line} imports {target} (only zkconsumer."
                             f"{ONLY_IN[top]} may)")
            elif part == "protocol" and top in NOT_IN_PROTOCOL:
                wrong.append(f"{module}:{line} imports {target} (protocol is sans-I/O)")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_itself_through_a_circle() -> None:
    """No import cycle between modules (Tarjan's strongly connected components)."""
    graph = {m: {t for t, _ in imps if t.startswith("zkconsumer") and t != m}
             for m, imps in _imports().items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    assert not circles, "import circles: " + "; ".join(" <-> ".join(c) for c in circles)


def test_the_layering_check_sees_a_sideways_import() -> None:
    """The checker itself: the table forbids what the layering forbids."""
    allowed = _closure(DEPENDS_ON)
    assert "daemon" not in allowed["mirror"] and "migrate" not in allowed["spark"]
    assert "client" not in allowed["protocol"] and "protocol" in allowed["consumer"]
    assert "kazoo" in ONLY_IN and all(part in DEPENDS_ON for part in ONLY_IN.values())
