"""The house's layers (docs/architecture.md): imports run downward only, and none goes round in
a circle at run time. Read from the source with ``ast`` (lazy imports inside functions count;
imports under ``if TYPE_CHECKING:`` do not: they never run).

Inside results/ the rooms have floors of their own (model < figures < judge < gate < history
< evaluation), and code outside results/ (src and benchmarks/) imports only their faces."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _paths import REPO_ROOT

ROOT = REPO_ROOT
PACKAGE = ROOT / "src" / "pytest_dlbench"

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
TOP = {"loggers", "plugin", "cli"}  # they may use everything below them
ALLOWED.update({
    "loggers": set(ALLOWED) - {"workloads"},
    "plugin": set(ALLOWED) | {"loggers"},
    "cli": set(ALLOWED) | {"loggers"},
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


def imports_of(source: str, here: str, *, is_package: bool = False,
               typing: bool = False) -> Iterator[tuple[str, int]]:
    """The imports of ``source`` (the module ``here``) that run; with ``typing``, those under
    ``if TYPE_CHECKING:`` too."""
    tree = ast.parse(source)
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not typing:
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
    from pytest_dlbench.results.figures.scoring import RunResult
def later():
    from pytest_dlbench.results.figures import telemetry
    from ..profile import capture
"""
    assert wrong_imports("pytest_dlbench.measure.bench", source) == [
        "pytest_dlbench.results.figures.telemetry", "pytest_dlbench.profile.capture"]
    assert layer("pytest_dlbench.core.errors") == "core"
    assert layer("pytest_dlbench.layout") == "layout"
    assert layer("pytest_dlbench.run.harness") == "run"


# -- results/ by job: its rooms, their floors and their faces ------------------------------------

RESULTS = "pytest_dlbench.results"
#: The rooms of results/, bottom first: each may import its own room and those below it.
FLOORS = ("model", "figures", "judge", "gate", "history", "evaluation")
ROOMS = ("model", "figures", "judge", "history")  # the sub-packages, each with a face
#: What code outside results/ may import: the results/ face, the rooms' faces, the gate and the
#: evaluation (modules of their own).
FACES = {RESULTS, *(f"{RESULTS}.{name}" for name in FLOORS)}


def room(module: str) -> str | None:
    """The room of a module of results/ (``pytest_dlbench.results.judge.paired``: judge); None
    for the results/ face itself."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["pytest_dlbench", "results"] else None


def floor_problems(module: str, targets: list[tuple[str, int]]) -> list[str]:
    here = room(module)
    if here is None:
        return []
    if here not in FLOORS:
        return [f"{module}: a module of results/ outside its rooms (put it in one)"]
    wrong = []
    for target, line in targets:
        there = room(target)
        if there in FLOORS and FLOORS.index(there) > FLOORS.index(here):
            wrong.append(f"{module}:{line} ({here}) imports {target} ({there})")
    return wrong


def test_results_rooms_import_their_own_floor_or_below() -> None:
    wrong = [problem for module, targets in project_imports().items()
             for problem in floor_problems(module, targets)]
    assert not wrong, "imports up the floors of results/:\n" + "\n".join(wrong)


def test_the_floor_checker_sees_an_upward_import() -> None:
    """A lazy import counts; a type-only one does not; its own room and the ones below pass."""
    source = """
from typing import TYPE_CHECKING
from pytest_dlbench.results.model.summary import SuiteSummary
from pytest_dlbench.results.judge import verdict
if TYPE_CHECKING:
    from pytest_dlbench.results.gate import run_failed
def later():
    from pytest_dlbench.results import gate
"""
    targets = list(imports_of(source, "pytest_dlbench.results.judge.noise"))
    assert floor_problems("pytest_dlbench.results.judge.noise", targets) == [
        "pytest_dlbench.results.judge.noise:8 (judge) imports pytest_dlbench.results.gate (gate)"]
    assert room("pytest_dlbench.results.history.records") == "history"
    assert room("pytest_dlbench.results") is None
    assert floor_problems("pytest_dlbench.results.extra", []) == [
        "pytest_dlbench.results.extra: a module of results/ outside its rooms (put it in one)"]


def outside_imports() -> Iterator[tuple[str, str, int]]:
    """(where, imported module, line) of every import of results/ (type-only ones too) by the
    package's modules outside results/ and by benchmarks/."""
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module == RESULTS or module.startswith(RESULTS + "."):
            continue
        found = imports_of(path.read_text(), module, is_package=path.name == "__init__.py",
                           typing=True)
        yield from ((module, target, line) for target, line in found)
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for target, line in imports_of(path.read_text(), f"benchmarks.{path.stem}", typing=True):
            yield f"benchmarks/{path.name}", target, line


def test_code_outside_results_imports_only_its_faces() -> None:
    wrong = [f"{where}:{line} imports {target}" for where, target, line in outside_imports()
             if target.startswith(RESULTS) and target not in FACES]
    assert not wrong, "imports of results/ past its faces:\n" + "\n".join(wrong)


def face_parts(package: str) -> tuple[dict[str, tuple[str, ...]], list[str], dict[str, str]]:
    """A face's ``_HOMES``, ``__all__`` and type-only imports (name -> module), from its source."""
    path = PACKAGE.parent.joinpath(*package.split("."), "__init__.py")
    homes: dict[str, tuple[str, ...]] = {}
    names: list[str] = []
    typed: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "_HOMES":
                homes = ast.literal_eval(node.value)
            elif node.targets[0].id == "__all__":
                names = ast.literal_eval(node.value)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom):
                    typed.update({alias.name: imp.module or "" for alias in imp.names})
    return homes, names, typed


@pytest.mark.parametrize("package", [RESULTS, *(f"{RESULTS}.{name}" for name in ROOMS)])
def test_a_face_says_each_name_once_where_it_lives(package: str) -> None:
    """``_HOMES``, ``__all__`` and the type checker's imports name the same things, each from
    the module that defines it; no name hides a submodule of the package (``from
    pytest_dlbench.results.judge import confirm`` would be the module or the function, by the
    order of imports)."""
    homes, names, typed = face_parts(package)
    listed = {name: f"{package}.{module}" for module, ns in homes.items() for name in ns}
    assert sorted(listed) == sorted(names) == sorted(typed)
    assert typed == listed
    face = importlib.import_module(package)
    for name, module in listed.items():
        assert getattr(face, name) is getattr(importlib.import_module(module), name)
        assert not PACKAGE.parent.joinpath(*package.split("."), f"{name}.py").exists(), name
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        face.nothing_here  # noqa: B018


def test_a_face_reads_its_name_where_it_is_defined_each_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that patches the defining module is seen through the face, and its undoing too:
    the face keeps nothing (code that imports a name at its call reads the patched one)."""
    from pytest_dlbench.results import figures
    from pytest_dlbench.results.figures import machine

    real = machine.readiness_problems

    def patched(state: object) -> list[str]:
        return ["patched"]

    monkeypatch.setattr(machine, "readiness_problems", patched)
    from pytest_dlbench.results.figures import readiness_problems

    assert readiness_problems is patched and figures.readiness_problems is patched
    monkeypatch.undo()
    assert figures.readiness_problems is real


def loaded_after(code: str) -> list[str]:
    """The modules of results/ a fresh interpreter has loaded after ``code``."""
    probe = (f"import sys\n{code}\nprint('\\n'.join(sorted(m for m in sys.modules "
             f"if m.startswith('{RESULTS}'))))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(PACKAGE.parent), *filter(None, [os.environ.get("PYTHONPATH")])])}
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True, cwd=ROOT, env=env)
    return out.stdout.split()


def test_the_faces_are_lazy() -> None:
    """Importing the faces imports none of the rooms' modules; asking a face for a name imports
    its module (and what that module imports), not the rest of the room."""
    faces = [f"{RESULTS}.{name}" for name in ROOMS]
    assert loaded_after("\n".join(f"import {face}" for face in faces)) == sorted(
        [RESULTS, *faces])
    loaded = loaded_after(f"from {RESULTS}.judge import ROUNDS")
    assert f"{RESULTS}.judge.defaults" in loaded
    assert f"{RESULTS}.judge.paired" not in loaded and f"{RESULTS}.judge.stats" not in loaded


def test_a_benchmarks_child_loads_no_scoring() -> None:
    """A benchmark's child (``python -m pytest`` with the plugin, plugin/child.py) imports the
    faces it needs and the option table's few modules, not the scoring nor the judging: those
    run in the parent."""
    loaded = loaded_after("import pytest_dlbench.plugin.child")
    assert f"{RESULTS}.figures.scoring" not in loaded
    assert not [m for m in loaded if m.startswith((f"{RESULTS}.model.", f"{RESULTS}.history."))]
    assert f"{RESULTS}.judge.stats" not in loaded and f"{RESULTS}.evaluation" not in loaded


def test_the_option_table_loads_no_scoring_nor_statistics() -> None:
    """pytest imports the option table at start-up (options.py): the gate's statuses, the
    defaults, the verdict's words and the score names, nothing that scores or tests."""
    assert loaded_after("import pytest_dlbench.options") == sorted([
        RESULTS, f"{RESULTS}.figures", f"{RESULTS}.figures.milabench_score", f"{RESULTS}.gate",
        f"{RESULTS}.judge", f"{RESULTS}.judge.defaults", f"{RESULTS}.judge.verdict"])


def test_the_examples_of_the_architecture_page_run() -> None:
    """docs/architecture.md's Python blocks (the faces' imports) run as written."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "docs/architecture.md", "exec"), {})
