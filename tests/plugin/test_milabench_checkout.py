"""docs/suites.md's command on a fresh milabench checkout (issue 41 item 2): milabench's own
``tests/conftest.py`` imports milabench, which is not installed to run its suites; pytest loads
the conftests of the directory it starts in and of its ``test*`` folders before collecting, so
``pytest --bench-suite=config/standard.yaml`` stopped there with exit 4. plugin/milabench.py
starts the conftest search from the suite files instead, in a milabench checkout only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _paths import TESTS_DIR

from pytest_dlbench.plugin.milabench import milabench_checkout

DATA = TESTS_DIR / "data"
#: What milabench's tests/conftest.py does first (milabench/tests/conftest.py).
MILABENCH_CONFTEST = "from milabench.testing import official_config\n"


def checkout(root: Path) -> Path:
    """A milabench checkout's layout: its config/ (our copy of milabench's suites), a tiny
    voir folder as benchmarks/torchvision, and a tests/conftest.py that cannot be imported
    without milabench installed."""
    shutil.copytree(DATA / "milabench_config", root / "config")
    shutil.copytree(DATA / "voirbench", root / "benchmarks" / "torchvision")
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(MILABENCH_CONFTEST)
    (root / "pyproject.toml").write_text('[tool.poetry]\nname = "milabench"\n')
    return root


def test_a_checkout_is_the_folder_holding_config_and_benchmarks(tmp_path: Path) -> None:
    root = checkout(tmp_path / "milabench")
    (root / "cpu.yaml").write_text("include: config/standard.yaml\n")
    assert milabench_checkout(root / "config" / "standard.yaml") == root.resolve()
    assert milabench_checkout(root / "cpu.yaml") == root.resolve()  # an overlay beside config/
    assert milabench_checkout(root / "config" / "nope.yaml") is None  # no such file
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "s.yaml").write_text("a: {definition: x:y}\n")
    assert milabench_checkout(tmp_path / "mine" / "s.yaml") is None


@pytest.mark.slow  # a pytest run (in-process): seconds
def test_the_documented_command_collects_on_a_fresh_checkout(pytester: pytest.Pytester) -> None:
    checkout(pytester.path)
    result = pytester.runpytest("--bench-suite=config/standard.yaml", "-k", "resnet50",
                                "--co", "-q", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()[-2000:]  # was 4: ImportError in tests/conftest
    result.stdout.fnmatch_lines(["config/standard.yaml::resnet50[[]D0[]]"])
    assert "milabench" not in " ".join(result.stderr.lines)


@pytest.mark.slow  # a pytest run (in-process): seconds
def test_other_suite_runs_still_load_the_starting_directorys_conftests(
        pytester: pytest.Pytester) -> None:
    """Only a milabench checkout is treated so: a project's tests/conftest.py (its options, its
    hooks) loads for a suite run as pytest always loads it."""
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "conftest.py").write_text(
        "def pytest_report_header(config):\n    return ['project conftest loaded']\n")
    (pytester.path / "defs.py").write_text("def run(bench):\n    pass\n")
    (pytester.path / "s.yaml").write_text("one: {definition: defs.py:run, weight: 1}\n")
    result = pytester.runpytest("--bench-suite=s.yaml", "--co", "-p", "no:randomly")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["project conftest loaded"])


@pytest.mark.slow
def test_the_documented_command_runs_the_folder_on_a_fresh_checkout(tmp_path: Path) -> None:
    """The command of docs/suites.md as a user types it, in a fresh interpreter."""
    root = checkout(tmp_path / "milabench")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "120"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=config/standard.yaml", "-k", "resnet50",
         f"--bench-base={tmp_path / 'out'}", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "2 passed" in done.stdout, out[-3000:]
    assert "milabench: resnet50 " in done.stdout  # its figure: the folder ran through voir
