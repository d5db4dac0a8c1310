"""The pytest plugin's objects declare their state, typed, in ``__init__`` (as pytest-xdist's
do): none is created later and read back with ``getattr(self, ...)``, none reads another
object's private run directory, and the tracking plugin is handed the reporter it logs from
instead of finding it by name (issue 22, item 8). Read from the source with ``ast``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from _paths import REPO_ROOT

PLUGIN = REPO_ROOT / "src" / "pytest_dlbench" / "plugin"
SOURCES = sorted(PLUGIN.glob("*.py"))


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name | ast.Attribute)
            and (n.func.id if isinstance(n.func, ast.Name) else n.func.attr) == name]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_attribute_of_self_is_looked_up_by_name(path: Path) -> None:
    tree = ast.parse(path.read_text())
    found = [f"{path.name}:{c.lineno}" for name in ("getattr", "hasattr") for c in calls(tree, name)
             if c.args and isinstance(c.args[0], ast.Name) and c.args[0].id == "self"]
    assert not found, "state created later and read with getattr: declare it in __init__"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_private_run_dir_of_another_object(path: Path) -> None:
    tree = ast.parse(path.read_text())
    found = [f"{path.name}:{n.lineno}" for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and n.attr == "_run_dir"
             and not (isinstance(n.value, ast.Name) and n.value.id == "self")]
    assert not found, "use the session's existing_run_dir()"


def test_the_tracking_plugin_is_handed_the_reporter() -> None:
    for path in SOURCES:
        for call in calls(ast.parse(path.read_text()), "get_plugin"):
            assert not (call.args and isinstance(call.args[0], ast.Constant)
                        and call.args[0].value == "dlbench-reporter"), f"{path.name}:{call.lineno}"
    from pytest_dlbench.plugin.tracking import TrackingPlugin

    assert "reporter" in TrackingPlugin.__init__.__code__.co_varnames
