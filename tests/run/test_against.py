"""--bench-against: the base revision's worktree (run/against.py) and the plugin's one-line
refusals. The end-to-end runs (exit 6 and 0, Ctrl-C) are in test_ci_recipe.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _git import git, worktrees

from pytest_dlbench.run.against import (
    LOCK_REASON,
    WORKTREE_PREFIX,
    AgainstError,
    BaseSide,
    remove_stale_worktrees,
    source_paths,
    with_python_path,
)
from pytest_dlbench.suite import resolve_suite

SUITE = textwrap.dedent(
    """
    _base: {voir: {options: {skip: 1, stop: 3}}}
    kept: {inherits: _base, definition: defs.py:run, weight: 1}
    renamed: {inherits: _base, definition: toypkg.bench:run, weight: 1}
    """
)


STEP = textwrap.dedent(
    """
    import time


    def run(bench):
        for _ in bench.iterate(range(1000), batch_size=1):
            time.sleep(0.02)
    """
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src" / "toypkg").mkdir(parents=True)
    (repo / "src" / "toypkg" / "__init__.py").write_text("")
    (repo / "src" / "toypkg" / "bench.py").write_text(STEP)
    (repo / "defs.py").write_text(STEP)
    (repo / "s.yaml").write_text(SUITE)
    (repo / "pytest.ini").write_text("[pytest]\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    # The candidate: one benchmark renamed (the base revision does not have "fresh").
    (repo / "s.yaml").write_text(SUITE.replace("renamed:", "fresh:"))
    git(repo, "commit", "-qam", "rename")
    return repo


def test_worktree_of_a_revision_and_its_suites(repo: Path) -> None:
    side = BaseSide.create("HEAD~1", repo / "s.yaml")
    try:
        assert side.sha == git(repo, "rev-parse", "HEAD~1")
        assert side.head == git(repo, "rev-parse", "HEAD")
        assert side.path.name.startswith(WORKTREE_PREFIX) and side.path.is_dir()
        assert (side.path / "s.yaml").read_text() == SUITE  # the base revision's files
        assert len(worktrees(repo)) == 2
        assert side.map_path(repo / "s.yaml") == side.path / "s.yaml"
        assert side.map_path(Path("/usr/lib")) == Path("/usr/lib")  # outside: the same
        candidate = resolve_suite(repo / "s.yaml")
        side.resolve([candidate], (), {"kept", "fresh"})
        # File definitions resolve inside the worktree; a benchmark it lacks is one note.
        assert side.specs["kept"].definition == f"{side.path / 'defs.py'}:run"
        assert "fresh" not in side.specs
        assert side.notes == [f"s.yaml at HEAD~1 ({side.sha[:7]}) has no benchmark fresh: "
                              "candidate side only, no verdict"]
        assert side.dirty == () and side.dirty_note() is None
        assert source_paths(side.path, side.path) == [str(side.path / "src")]
        env = with_python_path({"PYTHONPATH": "/elsewhere"}, source_paths(repo, repo))
        assert env["PYTHONPATH"] == f"{repo / 'src'}{os.pathsep}/elsewhere"
    finally:
        side.remove()
    assert not side.path.exists()
    assert len(worktrees(repo)) == 1  # git's record of it is gone too
    side.remove()  # twice is fine


def test_worktree_removed_even_when_already_deleted(repo: Path) -> None:
    side = BaseSide.create("main", repo)
    import shutil

    shutil.rmtree(side.path)
    side.remove()
    assert len(worktrees(repo)) == 1


def test_missing_suite_and_dirty_tree_notes(repo: Path) -> None:
    (repo / "other.yaml").write_text("solo: {definition: defs.py:run}\n")  # untracked
    (repo / "defs.py").write_text(STEP + "\n# changed\n")  # a tracked change
    side = BaseSide.create("HEAD", repo)
    try:
        side.resolve([resolve_suite(repo / "other.yaml")], (), {"solo"})
        assert side.specs == {}
        assert side.notes == [f"other.yaml does not exist at HEAD ({side.sha[:7]}): solo run "
                              "on the candidate side only"]
        assert side.dirty == ("defs.py",)
        assert side.dirty_note() == (
            f"uncommitted changes in 1 tracked file (defs.py) are part of the candidate side, "
            f"measured against HEAD ({side.sha[:7]})")
        assert BaseSide.from_dict(side.to_dict()).path == side.path
        assert not BaseSide.from_dict(side.to_dict()).owner  # a worker never removes it
    finally:
        side.remove()


def test_bad_revisions(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(AgainstError, match=r"--bench-against=nope: no such revision in .*repo"):
        BaseSide.create("nope", repo)
    with pytest.raises(AgainstError, match="not a revision"):
        BaseSide.create("--output=x", repo)
    (tmp_path / "plain").mkdir()
    with pytest.raises(AgainstError, match="is not inside a git repository"):
        BaseSide.create("HEAD", tmp_path / "plain")
    assert len(worktrees(repo)) == 1


# -- the plugin's refusals: one line, exit status 4, nothing left behind ----------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bench-against=nope"], "ERROR: --bench-against=nope: no such revision in *repo*"),
        (["--bench-rounds=3"], "ERROR: --bench-rounds goes with --bench-against*"),
        (["--bench-against=HEAD", "--bench-rounds=1"],
         "*--bench-rounds: rounds must be a whole number, 2 or more, got '1'"),
        (["--bench-against=HEAD", "--bench-repeat=3"], "ERROR: --bench-against runs *rounds*"),
        (["--bench-against=HEAD", "--bench-isolation=inline"],
         "ERROR: --bench-against needs --bench-isolation=process*"),
        (["--bench-against=HEAD", "--bench-compare=b.json"],
         "ERROR: --bench-against and --bench-compare: use one*"),
    ],
)
def test_refused_in_one_line(repo: Path, args: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "-p", "no:cacheprovider",
         *args],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    from fnmatch import fnmatch

    assert any(fnmatch(line, message) for line in lines), result.stderr
    assert len(worktrees(repo)) == 1
    assert not (repo / ".dlbench").exists()  # nothing ran


def test_collect_only_checks_the_revision_without_a_worktree(repo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "-p", "no:cacheprovider",
         "--bench-against=HEAD~1", "--bench-rounds=2", "--collect-only", "-q"],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # Each round is an item: round r runs both sides.
    assert "s.yaml::fresh[D0-R1]" in result.stdout and "s.yaml::kept[D0-R0]" in result.stdout
    assert len(worktrees(repo)) == 1


@pytest.mark.slow
def test_a_benchmark_the_base_lacks_runs_on_the_candidate_side_only(repo: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--bench-suite=s.yaml", "-p", "no:cacheprovider",
         "--bench-against=HEAD~1", "--bench-rounds=2", "-W", "default"],
        cwd=repo, capture_output=True, text=True, timeout=900,
        env={**os.environ, "COLUMNS": "160",
             "PYTHONPATH": os.pathsep.join([str(repo / "src"), os.environ.get("PYTHONPATH", "")])},
    )
    out = result.stdout + result.stderr
    assert result.returncode in (0, 6), out
    sha = git(repo, "rev-parse", "--short=7", "HEAD~1")
    note = f"s.yaml at HEAD~1 ({sha}) has no benchmark fresh: candidate side only, no verdict"
    assert f"warning: {note}" in result.stdout  # in the dlbench section
    assert note in out.split("warnings summary")[-1]  # and as a pytest warning
    assert "only on the candidate side: fresh" in result.stdout
    (run,) = (repo / ".dlbench" / "runs").iterdir()
    assert sorted(p.name for p in run.glob("*.data")) == [
        "fresh.D0.R0.data", "fresh.D0.R1.data", "kept.D0.R0.data", "kept.D0.R1.data"]
    assert sorted(p.name for p in (run / "base").glob("*.data")) == [
        "kept.D0.R0.data", "kept.D0.R1.data"]
    assert len(worktrees(repo)) == 1


def _locked_worktree(repo: Path, where: Path, pid: int) -> Path:
    reason = LOCK_REASON.format(pid=pid, host=socket.gethostname())
    git(repo, "worktree", "add", "--detach", "--quiet", "--lock", "--reason", reason,
        str(where), "HEAD")
    return where


def test_a_worktree_locked_by_a_zombie_is_stale_and_a_live_ones_stays(
        repo: Path, tmp_path: Path) -> None:
    """A session SIGKILLed under a parent that lives on and never reaps it (a CI runner's shell)
    is a zombie: its pid answers signal 0, yet it runs nothing, and its worktree is stale."""
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while (stat := Path(f"/proc/{zombie.pid}/stat")).exists() and ") Z " not in stat.read_text():
        os.sched_yield()  # exited, not reaped: wait() is only called below
    live = _locked_worktree(repo, tmp_path / f"{WORKTREE_PREFIX}live", os.getpid())
    left = _locked_worktree(repo, tmp_path / f"{WORKTREE_PREFIX}zombie", zombie.pid)
    try:
        assert remove_stale_worktrees(repo) == [left]
        assert live.is_dir() and not left.exists()
    finally:
        zombie.wait()
