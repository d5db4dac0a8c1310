"""The shape of tests/ (docs/architecture.md, "A new test"): what test files share lives in a
helper (tests/_*.py), never in a test module another one imports, and no two folders hold one
test file name (pytest's default import mode imports a test file by its basename)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

from _paths import TESTS_DIR


def all_test_files() -> list[Path]:
    return sorted(TESTS_DIR.rglob("test_*.py"))


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, top-level module name) of every absolute import in ``path``, nested ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


def imports_of_test_modules(paths: list[Path]) -> list[str]:
    """``file:line imports name`` for each import in ``paths`` of a module named as a test file."""
    names = {path.stem for path in all_test_files()}
    return [f"{path}:{line} imports {name}"
            for path in paths for line, name in imported_modules(path) if name in names]


def test_no_test_module_imports_another() -> None:
    # What two test files share goes in a tests/_*.py helper.
    assert imports_of_test_modules(all_test_files()) == []


def test_the_check_sees_an_import_of_a_test_module(tmp_path: Path) -> None:
    # As tests/report/test_report_words.py imported tests/suite/test_presets.py, at the top
    # and inside a function; a helper and a package import pass.
    module = tmp_path / "test_example.py"
    module.write_text("from _runs import write_run\nimport pytest_dlbench.layout\n"
                      "from test_presets import records\n\n\ndef f():\n"
                      "    import test_escapes.x\n", encoding="utf-8")
    assert imports_of_test_modules([module]) == [f"{module}:3 imports test_presets",
                                                 f"{module}:7 imports test_escapes"]


def test_no_two_folders_hold_one_test_file_name() -> None:
    counts = Counter(path.name for path in all_test_files())
    assert [name for name, count in counts.items() if count > 1] == []
