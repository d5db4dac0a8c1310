"""--bench-against where the benchmark lives in a git submodule (issue 40 item 15): a worktree
does not check submodules out, so every base run would fail ("incomparable", exit 0, nothing
said). It is refused at set-up in one line naming the submodule, on both paths, before a
worktree is made."""

from __future__ import annotations

import os
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest
from _git import git, worktrees
from _hostile_cases import SUBMODULE_COMMAND_LINE, SUBMODULE_SUITE_LINE
from _paired import judge

from pytest_dlbench.run.against import WORKTREE_PREFIX, AgainstError, BaseSide, submodule_of

TEST = "def test_quick(bench):\n    bench.log_rate(1.0)\n"


@pytest.fixture
def superproject(tmp_path: Path) -> Path:
    """A repository whose benchmarks (a suite, its definition, a test file) are in a submodule
    ``benchmarks/dl``, and a suite of its own at the top."""
    sub = tmp_path / "dl"
    sub.mkdir()
    (sub / "defs.py").write_text("def good(bench):\n    bench.log_rate(1.0)\n")
    (sub / "s.yaml").write_text("good: {definition: defs.py:good}\n")
    (sub / "test_dl.py").write_text(TEST)
    git(sub, "init", "-q", "-b", "main")
    git(sub, "add", ".")
    git(sub, "commit", "-q", "-m", "benchmarks")
    top = tmp_path / "top"
    top.mkdir()
    (top / "pytest.ini").write_text("[pytest]\n")
    (top / "defs.py").write_text("def good(bench):\n    bench.log_rate(1.0)\n")
    (top / "own.yaml").write_text("good: {definition: defs.py:good}\n")
    git(top, "init", "-q", "-b", "main")
    git(top, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub),
        "benchmarks/dl")
    git(top, "add", ".")
    git(top, "commit", "-q", "-m", "with a submodule")
    return top


def test_submodule_of_names_the_submodule(superproject: Path) -> None:
    sha = git(superproject, "rev-parse", "HEAD").strip()
    inside = superproject / "benchmarks" / "dl" / "s.yaml"
    assert submodule_of(superproject, sha, [superproject / "own.yaml", inside]) == (
        inside, "benchmarks/dl")
    assert submodule_of(superproject, sha, [superproject / "benchmarks" / "dl"]) == (
        superproject / "benchmarks" / "dl", "benchmarks/dl")
    assert submodule_of(superproject, sha, [superproject / "own.yaml", superproject]) is None
    assert submodule_of(superproject, sha, [Path("/elsewhere/s.yaml")]) is None
    with pytest.raises(AgainstError, match=(
            r"^--bench-against=HEAD: benchmarks/dl/s.yaml is in the git submodule "
            r"benchmarks/dl, which a worktree does not check out: run pytest inside the "
            r"submodule, against a revision of its own history$")):
        BaseSide.create("HEAD", superproject, [inside])




@pytest.mark.parametrize(
    ("args", "file"),
    [
        (["--bench-suite=benchmarks/dl/s.yaml"], "s.yaml"),
        (["benchmarks/dl/test_dl.py", "-p", "no:xdist"], "test_dl.py"),
        (["--bench-suite=benchmarks/dl/s.yaml", "--collect-only"], "s.yaml"),
    ],
    ids=["suite", "fixture", "collect-only"],
)
def test_a_benchmark_in_a_submodule_is_refused_in_one_line(
    superproject: Path, tmp_path: Path, args: list[str], file: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider",
         "--bench-against=HEAD", "--bench-base=out"],
        cwd=superproject, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    line = SUBMODULE_SUITE_LINE.format(file=file)
    assert any(fnmatch(out, line) for out in result.stderr.splitlines()), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert worktrees(superproject) == [f"worktree {superproject}"]
    assert not list(tmp_path.glob(f"{WORKTREE_PREFIX}*"))


@pytest.mark.slow
def test_a_suite_of_the_superproject_itself_still_runs(superproject: Path,
                                                       tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=own.yaml", "-p", "no:cacheprovider",
         "--bench-against=HEAD", "--bench-base=out", "--bench-rounds=2", "-p", "no:xdist"],
        cwd=superproject, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode != pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "submodule" not in result.stderr


CMD_SUITE = """
cmd:
  definition:
    command: [python, "{suite_dir}/benchmarks/dl/defs.py"]
    parser: {regex: 'took (?P<seconds>[\\d.]+)s'}
"""


def test_a_command_path_into_a_submodule_is_refused_in_one_line(superproject: Path,
                                                                 tmp_path: Path) -> None:
    """The suite is the superproject's own; its command runs a file of the submodule, which
    the base worktree does not have: every base run would fail, "incomparable", exit 0."""
    (superproject / "cmd.yaml").write_text(CMD_SUITE)
    git(superproject, "add", "cmd.yaml")
    git(superproject, "commit", "-q", "-m", "a command into the submodule")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=cmd.yaml", "-p", "no:cacheprovider",
         "--bench-against=HEAD", "--bench-base=out", "-p", "no:xdist"],
        cwd=superproject, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert f"ERROR: {SUBMODULE_COMMAND_LINE}" in result.stderr.splitlines(), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert worktrees(superproject) == [f"worktree {superproject}"]
    assert not list(tmp_path.glob(f"{WORKTREE_PREFIX}*"))


def test_a_gate_that_compared_no_weighted_benchmark_is_not_a_pass(tmp_path: Path,
                                                                  capsys) -> None:
    """Every base run failed (a command the base worktree lacks): no verdict but
    "incomparable". The gate compared nothing: exit status 9 with the cause, never 0."""
    from _paired import paired_run
    from _runs import write_run

    from pytest_dlbench import layout
    from pytest_dlbench.cli import main as dlbench
    from pytest_dlbench.results.gate import EXIT_INCONCLUSIVE, final_status, gate_record
    from pytest_dlbench.results.judge import INCOMPARABLE

    run = paired_run(tmp_path, {"x": (100.0, 100.0), "y": (50.0, 50.0)}, rounds=4)
    for name in ("x", "y"):
        for r in range(4):
            write_run(layout.base_dir(run), name, repeat=r, status="fail",
                      reason="fail: ExternalCommandError: the command printed no line")
    _, _, comparison = judge(run)
    assert [b.verdict for b in comparison.benchmarks] == [INCOMPARABLE, INCOMPARABLE]
    assert comparison.compared_nothing and not comparison.regressed
    assert final_status(failed=False, comparison=comparison) == EXIT_INCONCLUSIVE
    record = gate_record(comparison, EXIT_INCONCLUSIVE)
    assert record is not None and record["verdict"] == "inconclusive"
    assert record["causes"] == ["nothing"] and "compared nothing" in record["inconclusive"]["gate"]
    assert dlbench(["report", str(run)]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    assert "inconclusive: the gate: none of x, y could be compared" in out
    assert ("the gate compared nothing: no weighted benchmark has a figure on both sides "
            "(exit status 9)") in out
    # One benchmark compared is a gate that compared something: its own verdict stands.
    run2 = paired_run(tmp_path / "2", {"x": (100.0, 100.0), "y": (50.0, 50.0)}, rounds=4)
    for r in range(4):
        write_run(layout.base_dir(run2), "y", repeat=r, status="fail", reason="fail: no")
    assert not judge(run2)[2].compared_nothing
