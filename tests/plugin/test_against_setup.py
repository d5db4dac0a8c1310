"""The one set-up of ``--bench-against`` (plugin/against_setup.py), shared by a suite run and the
``bench`` fixture's run: the worktree is removed at the end of the session, on Ctrl-C and on
SIGTERM, whichever path made it (issue 38, item 2)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _git import git, worktrees

from pytest_dlbench.plugin import against_setup
from pytest_dlbench.run.against import WORKTREE_PREFIX, BaseSide

#: A benchmark that runs until it is stopped, with a ``rate`` record early.
ENDLESS = textwrap.dedent(
    """
    import time

    def test_endless(bench):
        for _ in bench.iterate(range(1_000_000), batch_size=4):
            time.sleep(0.01)
    """
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit: a test file using the ``bench`` fixture."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_dl.py").write_text(ENDLESS)
    (repo / "pytest.ini").write_text("[pytest]\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "test_dl.py", "pytest.ini")
    git(repo, "commit", "-q", "-m", "base")
    return repo


def _wait_for_rate(run_base: Path, pattern: str, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        for path in run_base.glob(pattern):
            if '"rate"' in path.read_text():
                return path
        time.sleep(0.2)
    proc.kill()
    output, _ = proc.communicate()
    raise AssertionError(f"the base side never measured anything:\n{output}")


# -- the defect: the fixture path's worktree outlived a SIGTERM --------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_a_fixture_run_leaves_no_worktree(repo: Path, tmp_path: Path,
                                                      signum: int) -> None:
    temp = tmp_path / "temp"  # the worktree is made here: nothing of it may stay
    temp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "test_dl.py", "--bench-against=HEAD",
         "--bench-rounds=2", "--bench-base=out", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TMPDIR": str(temp), "COLUMNS": "120"},
    )
    # Round 0 runs the base side first: the signal lands while a child runs in the worktree.
    stream = _wait_for_rate(repo / "out" / "runs", "*/base/test_endless.D0.R0.data", proc)
    run_dir = stream.parent.parent
    worktree = Path(json.loads((run_dir / "against.json").read_text())["worktree"])
    assert worktree.is_dir() and worktree.parent == temp.resolve()
    assert len(worktrees(repo)) == 2
    os.kill(proc.pid, signum)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output
    assert not worktree.exists(), output
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not list(temp.glob(f"{WORKTREE_PREFIX}*"))
    records = [json.loads(line) for line in stream.read_text().splitlines() if line.strip()]
    assert records[-1]["event"] == "end" and records[-1]["reason"] == "interrupted"


# -- one set-up: the same refusals and the same --collect-only on both paths ------------------

PATHS = {"suite": ["--bench-suite=s.yaml"], "fixture": ["test_dl.py", "-p", "no:xdist"]}


@pytest.fixture
def both(repo: Path) -> Path:
    """``repo`` with a suite too (its benchmark never runs here)."""
    (repo / "defs.py").write_text("def good(bench):\n    pass\n")
    (repo / "s.yaml").write_text("good: {definition: defs.py:good}\n")
    git(repo, "add", "defs.py", "s.yaml")
    git(repo, "commit", "-q", "-m", "a suite")
    return repo


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--bench-against=nope"], "ERROR: --bench-against=nope: no such revision in *"),
        (["--bench-against=HEAD", "--bench-compare=b.json"],
         "ERROR: --bench-against and --bench-compare: use one*"),
        (["--bench-against=nope", "--collect-only"],
         "ERROR: --bench-against=nope: no such revision in *"),
    ],
    ids=["no-revision", "with-compare", "collect-only"],
)
def test_both_paths_refuse_in_the_same_line(both: Path, tmp_path: Path, path: str,
                                            args: list[str], line: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *PATHS[path], "-p", "no:cacheprovider", *args],
        cwd=both, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    from fnmatch import fnmatch

    assert any(fnmatch(out, line) for out in result.stderr.splitlines()), result.stderr
    assert worktrees(both) == [f"worktree {both}"]
    assert not list(tmp_path.glob(f"{WORKTREE_PREFIX}*"))


@pytest.mark.parametrize("path", PATHS)
def test_collect_only_makes_no_worktree_on_either_path(both: Path, tmp_path: Path,
                                                       path: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *PATHS[path], "-p", "no:cacheprovider",
         "--bench-against=HEAD", "--collect-only", "-q"],
        cwd=both, capture_output=True, text=True, timeout=300,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert worktrees(both) == [f"worktree {both}"]
    assert not list(tmp_path.glob(f"{WORKTREE_PREFIX}*"))


# -- the removal itself, without a session -----------------------------------------------------

def _side(repo: Path) -> BaseSide:
    return BaseSide.create("HEAD", repo)


def test_removal_on_sigterm_removes_the_worktree_and_restores_the_handler(repo: Path) -> None:
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    side = _side(repo)
    removal = against_setup.Removal(side)
    try:
        assert side.path.is_dir()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            time.sleep(5)
        # A second SIGTERM would kill: the handler put the default back when it ran.
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        removal()
        signal.signal(signal.SIGTERM, before)
    assert not side.path.exists() and worktrees(repo) == [f"worktree {repo}"]


def test_removal_leaves_someone_elses_handler_alone(repo: Path) -> None:
    def theirs(signum: int, frame: object) -> None:
        raise AssertionError("not sent")

    before = signal.signal(signal.SIGTERM, theirs)
    try:
        side = _side(repo)
        removal = against_setup.Removal(side)
        assert signal.getsignal(signal.SIGTERM) is theirs
        removal()
        assert signal.getsignal(signal.SIGTERM) is theirs
    finally:
        signal.signal(signal.SIGTERM, before)
    assert not side.path.exists()


def test_removal_twice_is_harmless_and_puts_the_default_back(repo: Path) -> None:
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        side = _side(repo)
        removal = against_setup.Removal(side)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        removal()
        removal()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)
    assert not side.path.exists() and worktrees(repo) == [f"worktree {repo}"]


def test_the_against_record_of_both_paths(repo: Path, tmp_path: Path) -> None:
    side = _side(repo)
    try:
        (repo / "test_dl.py").write_text(ENDLESS + "\n# changed\n")
        side.dirty = ("test_dl.py",)
        side.notes.append("a note")
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        against_setup.write_against(side, run_dir, rounds=3, test="wilcoxon", rate="median",
                                    fixed_rounds=True)
        record = json.loads((run_dir / "against.json").read_text())
    finally:
        side.remove()
    assert (run_dir / "base").is_dir()
    assert record == {"version": 1, **side.to_dict(), "rounds": 3, "order": "ABBA",
                      "first": ["base", "candidate", "base"], "test": "wilcoxon",
                      "rate": "median", "design": "fixed",
                      "warnings": ["a note", side.dirty_note()]}
