"""docs/ci.md's install steps, run as written (issue 41 item 1): pytest-dlbench is not on the
package index, so the workflow checks its repository out beside the project and installs both.

The workflow's ``uses: actions/checkout`` of pytest-dlbench is done here by a ``git clone`` of
this repository into the step's ``path``; its ``run:`` install steps then run unchanged in a
fresh virtual environment, in a project of the workflow's shape. The heavy requirements (torch,
...) that a CI job downloads are this environment's, seen through a path entry (pytest-dlbench
itself left out): pip finds them installed and downloads nothing else than the build backend."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from _paths import REPO_ROOT

ROOT = REPO_ROOT
DOCS = ROOT / "docs" / "ci.md"
#: Where the workflow checks pytest-dlbench out (its checkout step's ``path``).
CHECKOUT_PATH = ".pytest-dlbench"


def workflow_steps() -> list[dict[str, Any]]:
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None, "docs/ci.md has no yaml block"
    (job,) = yaml.safe_load(block.group(1))["jobs"].values()
    return list(job["steps"])


def install_steps(steps: list[dict[str, Any]]) -> list[str]:
    return [step["run"] for step in steps if str(step.get("run", "")).startswith("pip install")]


def test_the_workflow_installs_pytest_dlbench_from_its_repository() -> None:
    """No step names a distribution the index does not have."""
    steps = workflow_steps()
    (install,) = install_steps(steps)
    assert not re.search(r"(?<![./\w-])pytest-dlbench(?![\w/-])", install), install
    (checkout,) = [s for s in steps if "pytest-dlbench" in str(s.get("with", {}).get(
        "repository", ""))]
    assert checkout["uses"].startswith("actions/checkout@")
    assert f"./{checkout['with']['path']}" in install.split()


def test_the_install_is_pinned_cpu_only_and_cached() -> None:
    """A CPU runner gets no CUDA stack (5.9 GB unpinned): every pip line takes pytest-dlbench's
    pins, torch and torchvision come first from the CPU-only index, and pip's cache is kept,
    keyed on the pins and the requirements."""
    steps = workflow_steps()
    (install,) = install_steps(steps)
    lines = [line.split() for line in install.strip().splitlines()]
    pins = f"{CHECKOUT_PATH}/constraints.txt"
    assert all(words[:2] == ["pip", "install"] and words[words.index("-c") + 1] == pins
               for words in lines), install
    torch_line, rest = lines
    assert {"torch", "torchvision"} <= set(torch_line)
    assert torch_line[torch_line.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert "--index-url" not in rest and "--extra-index-url" not in rest
    pinned = (ROOT / "constraints.txt").read_text().split()
    assert any(p.startswith("torch==") for p in pinned)
    assert any(p.startswith("torchvision==") for p in pinned)
    (cache,) = [s for s in steps if str(s.get("uses", "")).startswith("actions/cache@")]
    assert cache["with"]["path"] == "~/.cache/pip"
    assert steps.index(cache) < [s.get("name") for s in steps].index("Install")
    for keyed_on in (pins, "pyproject.toml"):
        assert keyed_on in cache["with"]["key"]


def _shared_packages(tmp_path: Path) -> Path:
    """This environment's installed packages, pytest-dlbench and pip left out: one symbolic
    link each, in a folder a path entry of the fresh environment names."""
    site = Path(sysconfig.get_paths()["purelib"])
    shared = tmp_path / "shared"
    shared.mkdir()
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("pytest_dlbench", "_editable_impl_pytest_dlbench", "pip", "__pycache__")
                           ) or name.endswith(".pth"):
            continue
        (shared / entry.name).symlink_to(entry)
    return shared


@pytest.mark.slow
@pytest.mark.release  # a clone and a fresh venv: the CI recipe's install, run as written
def test_the_ci_install_steps_run_as_written(tmp_path: Path) -> None:
    steps = workflow_steps()
    (checkout,) = [s for s in steps if "pytest-dlbench" in str(s.get("with", {}).get(
        "repository", ""))]
    project = tmp_path / "project"
    (project / "src" / "toypkg").mkdir(parents=True)
    (project / "src" / "toypkg" / "__init__.py").write_text("")
    (project / "src" / "toypkg" / "bench.py").write_text(textwrap.dedent("""
        def step(bench):
            for _ in bench.iterate(range(10), batch_size=1):
                pass
    """))
    (project / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "toypkg"
        version = "0.1"

        [tool.hatch.build.targets.wheel]
        packages = ["src/toypkg"]
    """))
    (project / "bench_suites").mkdir()
    (project / "bench_suites" / "ci.yaml").write_text(
        "sleepy: {definition: toypkg.bench:step, weight: 1}\n")
    # actions/checkout of pytest-dlbench: this repository's committed state, at the step's path.
    subprocess.run(["git", "clone", "-q", str(ROOT), str(project / checkout["with"]["path"])],
                   check=True, timeout=300)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "shared.pth").write_text(f"{_shared_packages(tmp_path)}\n")
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               VIRTUAL_ENV=str(venv), PIP_NO_INPUT="1")
    for script in install_steps(steps):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (script, (done.stdout + done.stderr)[-3000:])

    where = subprocess.run([str(python), "-c", "import pytest_dlbench, toypkg; "
                            "print(pytest_dlbench.__file__); print(toypkg.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    plugin, toy = where.stdout.split()
    assert Path(plugin).is_relative_to(venv), plugin  # installed, not this checkout's src/
    assert Path(toy).is_relative_to(project / "src"), toy  # the project, in development mode
    collected = subprocess.run([str(python), "-m", "pytest", "--bench-suite=ci", "--co", "-q",
                                "-p", "no:randomly", "-p", "no:cacheprovider"],
                               cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert collected.returncode == 0, (collected.stdout + collected.stderr)[-3000:]
    assert "bench_suites/ci.yaml::sleepy[D0]" in collected.stdout
    shipped = subprocess.run([str(venv / "bin" / "dlbench"), "resolve", "smoke"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=300)
    assert shipped.returncode == 0 and "toy" in shipped.stdout, shipped.stderr[-2000:]
