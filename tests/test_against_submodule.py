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
from test_against_setup import git, worktrees

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


LINE = ("ERROR: --bench-against=HEAD: benchmarks/dl/{file} is in the git submodule "
        "benchmarks/dl, which a worktree does not check out: run pytest inside the submodule, "
        "against a revision of its own history")
#: The row of docs/running.md's "Bad input" table (tests/test_hostile_input.py's TABLE).
AGAINST_CASES: list[tuple[str, str, str]] = [
    ("`--bench-against=HEAD` with the suite in a git submodule `benchmarks/dl`",
     "refused, exit status 4", LINE.format(file="s.yaml").removeprefix("ERROR: ")),
]


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
    assert any(fnmatch(out, LINE.format(file=file)) for out in result.stderr.splitlines()), (
        result.stderr)
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
