"""Names and text (issue 24, items 10 and 14): a run name that looks like an option, long run
names, failure reasons of any size, spreadsheet formulas in CSV cells, terminals that cannot
show Unicode, YAML limits named, a dead fork server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_hostile_input import child_env

TOY = "pytest_dlbench.workloads.toy:main"


def _pytest(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=child_env())


@pytest.mark.slow
def test_a_run_name_that_starts_with_a_dash_reaches_the_child(tmp_path: Path) -> None:
    # The child's command line passes every value as --opt=value: '-x' is no option of its own.
    (tmp_path / "s.yaml").write_text(
        f"a: {{definition: {TOY}, voir: {{options: {{skip: 1, stop: 3}}}}}}\n")
    result = _pytest(tmp_path, "--bench-suite=s.yaml", "--bench-base=out",
                     "--bench-run-name=-x")
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    assert run_dir.name.startswith("-x.")
    records = [json.loads(line) for line in (run_dir / "a.D0.data").read_text().splitlines()]
    assert records[-1]["event"] == "end" and records[-1]["status"] == "ok"
