"""What a benchmark's child imports of results/ (docs/architecture.md, "The three processes of a
run"): the figures of its own stream and the verdict words, never the parent's judging of one
run against another, its evaluation, baselines or history.

Names are matched by their last parts, not their folders, so the rule holds whichever
sub-package of results/ a module lives in."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path

import pytest
from _procs import child_env

#: Words in the name of a results/ module that is the parent's alone: the judging against a
#: baseline or the other side (compare, its rows, the saved mode, paired, noise, confirm), the
#: evaluation of a run directory, baseline files, and the history.
PARENTS_ONLY = ("compare", "comparison", "saved", "paired", "noise", "confirm", "evaluation",
                "baseline", "history", "sessions", "changes", "frames")
#: What the child's pytest process imports before it runs anything: the plugin (pytest loads it),
#: the child's session and items, the harness (plugin/child.py, run/harness.py).
CHILD_ENTRY = ("pytest_dlbench.plugin", "pytest_dlbench.plugin.child",
               "pytest_dlbench.plugin.items", "pytest_dlbench.run.harness")


def parents_only(modules: Iterable[str]) -> list[str]:
    """The results/ modules among ``modules`` that a child must not import."""
    found = []
    for name in modules:
        parts = name.split(".")
        if parts[:2] != ["pytest_dlbench", "results"]:
            continue
        if any(word in part for part in parts[2:] for word in PARENTS_ONLY):
            found.append(name)
    return sorted(found)


def test_the_rule_names_a_module_wherever_results_keeps_it() -> None:
    assert parents_only([
        "pytest_dlbench.results.judge.paired", "pytest_dlbench.results.judge.saved",
        "pytest_dlbench.results.history.records", "pytest_dlbench.results.history.frames",
        "pytest_dlbench.results.figures.scoring", "pytest_dlbench.results.figures.telemetry",
        "pytest_dlbench.report.history",
    ]) == ["pytest_dlbench.results.history.frames", "pytest_dlbench.results.history.records",
           "pytest_dlbench.results.judge.paired", "pytest_dlbench.results.judge.saved"]


def test_the_childs_entry_imports_none_of_the_parents_judging() -> None:
    """A fresh interpreter, as a child starts: the modules it imports first."""
    script = ("import json, sys\n" + "".join(f"import {name}\n" for name in CHILD_ENTRY)
              + "print(json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=child_env(), check=True, timeout=120)
    modules = json.loads(done.stdout)
    assert "pytest_dlbench.plugin.child" in modules
    assert parents_only(modules) == []


#: In the project's conftest: each pytest process writes what it imported at its end.
DUMP = textwrap.dedent(
    """
    import json, os, sys

    def pytest_unconfigure(config):
        child = any(arg.startswith("--bench-child-spec") for arg in sys.argv)
        path = os.path.join(os.path.dirname(__file__), f"modules.{os.getpid()}.json")
        with open(path, "w") as f:
            json.dump({"child": child, "modules": sorted(sys.modules)}, f)
    """
)
STEP = textwrap.dedent(
    """
    def step(bench):
        for _ in bench.iterate(range(100), batch_size=2):
            pass
    """
)


@pytest.mark.slow
def test_a_real_child_imports_none_of_the_parents_judging(tmp_path: Path) -> None:
    """A whole run (a fresh child: its own interpreter, nothing inherited from a server), the
    modules listed after the benchmark ran and its stream was read back."""
    (tmp_path / "conftest.py").write_text(DUMP)
    (tmp_path / "defs.py").write_text(STEP)
    (tmp_path / "s.yaml").write_text(
        "toy: {definition: defs.py:step, voir: {options: {skip: 1, stop: 3}}}\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "--bench-base=out",
         "--bench-launcher=fresh", "-p", "no:cacheprovider", "-p", "no:randomly"],
        cwd=tmp_path, capture_output=True, text=True, env=child_env(), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    dumps = [json.loads(p.read_text()) for p in tmp_path.glob("modules.*.json")]
    children = [d["modules"] for d in dumps if d["child"]]
    parents = [d["modules"] for d in dumps if not d["child"]]
    assert len(children) == 1 and len(parents) == 1, [d["child"] for d in dumps]
    # The parent judged the run (so the words above name what it really imports) ...
    assert parents_only(parents[0])
    # ... and the child none of it.
    assert "pytest_dlbench.run.harness" in children[0]
    assert parents_only(children[0]) == []
