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


# -- item 13: what reaches a remote shell ---------------------------------------------------


def test_the_ssh_command_quotes_everything_it_sends_to_the_remote_shell(tmp_path: Path) -> None:
    from pytest_dlbench.run.launch.torchrun import ssh_command
    from pytest_dlbench.suite.system import Node

    folder = tmp_path / "a dir; touch pwned"
    folder.mkdir()
    value = "it's $(touch pwned) `touch pwned` ;touch pwned"
    argv = [sys.executable, "-c", "import os, sys; print(os.environ['NOTE'], sys.argv[1])",
            "$(touch pwned)"]
    remote = ssh_command(Node("n", "10.0.0.2"), argv, cwd=folder, env={"NOTE": value})[-1]
    # The remote side runs it with a shell: here, sh in the test's folder.
    out = subprocess.run(["sh", "-c", remote], cwd=tmp_path, capture_output=True, text=True,
                         check=True).stdout
    assert out == f"{value} $(touch pwned)\n"
    assert not list(tmp_path.rglob("pwned"))


@pytest.mark.parametrize("env", [{"X;touch${IFS}pwned;Y": "1"}, {"1X": "1"}, {"": "1"}])
def test_the_ssh_command_refuses_a_name_that_is_no_variable(env: dict[str, str]) -> None:
    from pytest_dlbench.run.launch.torchrun import ssh_command
    from pytest_dlbench.suite.system import Node

    with pytest.raises(ValueError, match="is not a variable name"):
        ssh_command(Node("n", "10.0.0.2"), ["true"], env=env)


def test_the_ssh_command_refuses_a_target_ssh_would_read_as_an_option() -> None:
    from pytest_dlbench.run.launch.torchrun import ssh_command
    from pytest_dlbench.suite.system import Node

    with pytest.raises(ValueError, match="would be read by ssh as an option"):
        ssh_command(Node("n", "-oProxyCommand=touch pwned"), ["true"])
