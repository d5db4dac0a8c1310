"""docs/figures.md names, for every figure, the test that holds it: each one named must exist,
so the table cannot point at a test that was renamed or removed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from _paths import REPO_ROOT

ROOT = REPO_ROOT
FIGURES = ROOT / "docs" / "figures.md"
NAMED = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_test_the_figures_table_names_exists() -> None:
    named = NAMED.findall(FIGURES.read_text())
    assert len(named) >= 12
    missing = [f"{file}::{name}" for file, name in named
               if not (ROOT / file).is_file() or name not in _test_functions(ROOT / file)]
    assert missing == []


def test_the_table_has_a_row_for_every_figure_the_report_prints() -> None:
    rows = {line.split("|")[1].strip() for line in FIGURES.read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| ---")}
    for figure in ("rate (`perf`)", "`std%`", "`perf_adj`", "score", "milabench score",
                   "TFLOP/s", "MFU",
                   "memory", "energy", "time-to-train", "paired ratio"):
        assert figure in rows
