"""The house's layers (docs/architecture.md): imports run downward only, and none goes round in
a circle at run time. Read from the source with ``ast`` (lazy imports inside functions count;
imports under ``if TYPE_CHECKING:`` do not: they never run)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from _paths import REPO_ROOT

PACKAGE = REPO_ROOT / "src" / "pytest_dlbench"

#: Each layer and the layers it may import. Bottom first. A layer is the first name under the
#: package, a folder or a module: ``core/`` holds the contracts everyone shares, ``layout`` (the
#: run directory's names and files) writes the specs handed to children, so it stands on suite/.
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "suite": {"core"},
    "layout": {"core", "suite"},
    "data": {"core"},
    "measure": {"core", "suite", "layout"},
    "profile": {"core", "suite", "layout", "measure"},
    "results": {"core", "suite", "layout", "measure"},
    "run": {"core", "suite", "layout", "measure", "profile"},
    "report": {"core", "suite", "layout", "measure", "profile", "results"},
    "workloads": {"core", "suite", "layout", "measure", "profile", "run", "data"},
    "options": {"core", "suite", "layout", "results", "report"},
}
TOP = {"loggers", "plugin", "cli", "cli_history"}  # they may use everything below them
ALLOWED.update({
    "loggers": set(ALLOWED) - {"workloads"},
    "plugin": set(ALLOWED) | {"loggers"},
    "cli": set(ALLOWED) | {"loggers", "cli_history"},
    "cli_history": set(ALLOWED),
})


def layer(module: str) -> str:
    """The layer of ``pytest_dlbench.<module>``: its first name, no exception."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "package"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(dotted: str) -> bool:
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports(path: Path) -> Iterator[tuple[str, int]]:
    """(imported project module, line) for every import that runs."""
    return imports_of(path.read_text(), module_name(path), is_package=path.name == "__init__.py")


def imports_of(source: str, here: str, *, is_package: bool = False) -> Iterator[tuple[str, int]]:
    tree = ast.parse(source)
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for n in ast.walk(node))
    package = here if is_package else here.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (sub if is_module(sub) else base), node.lineno


def project_imports() -> dict[str, list[tuple[str, int]]]:
    graph: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph[module_name(path)] = sorted({
            (m, line) for m, line in imports(path) if m.split(".")[0] == "pytest_dlbench"
        })
    return graph


def test_imports_run_downward() -> None:
    wrong = []
    for module, targets in project_imports().items():
        source = layer(module)
        if source == "package":
            continue  # the package's own __init__ re-exports the public names
        for target, line in targets:
            goal = layer(target)
            if goal in (source, "package"):
                continue
            if goal not in ALLOWED.get(source, set()):
                wrong.append(f"{module}:{line} ({source}) imports {target} ({goal})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_circle_between_modules() -> None:
    graph = {m: sorted({t for t, _ in ts if t in project_imports_keys()}) for m, ts in
             project_imports().items()}
    circles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                # A package importing its own submodules (its __init__) is no circle of modules.
                cycle = stack[stack.index(nxt):] + [nxt]
                if not any(a.startswith(b + ".") or b.startswith(a + ".")
                           for a, b in zip(cycle, cycle[1:], strict=False)):
                    circles.append(" -> ".join(cycle))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not circles, "import circles:\n" + "\n".join(circles)


def project_imports_keys() -> set[str]:
    return {module_name(p) for p in PACKAGE.rglob("*.py")}


def wrong_imports(module: str, source: str) -> list[str]:
    return [t for t, _ in imports_of(source, module) if t.startswith("pytest_dlbench.")
            and layer(t) not in ALLOWED[layer(module)] | {layer(module)}]


def test_the_checker_sees_a_wrong_import() -> None:
    """The checker itself: upward imports are found, lazy ones too; type-only ones are not."""
    source = """
from typing import TYPE_CHECKING
from pytest_dlbench.measure import stream
from . import timing
from .. import layout
if TYPE_CHECKING:
    from pytest_dlbench.results.scoring import RunResult
def later():
    from pytest_dlbench.results import telemetry
    from ..profile import capture
"""
    assert wrong_imports("pytest_dlbench.measure.bench", source) == [
        "pytest_dlbench.results.telemetry", "pytest_dlbench.profile.capture"]
    assert layer("pytest_dlbench.core.errors") == "core"
    assert layer("pytest_dlbench.layout") == "layout"
    assert layer("pytest_dlbench.run.harness") == "run"
