"""--bench-against's git calls (issue 40 item 5; run/against.py): the repository's hooks never
run in the worktree's checkout, and an interrupt while git runs leaves no git process (nor what
git started) behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from _git import git
from _polling import wait_until

from pytest_dlbench.run.against import BaseSide


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """One commit, and a post-checkout hook that leaves a mark."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "one")
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\necho ran >> {tmp_path / 'hook-ran'}\n")
    hook.chmod(0o755)
    return repo


def test_the_worktree_is_made_without_the_repositorys_hooks(repo: Path, tmp_path: Path) -> None:
    git(repo, "checkout", "-q", "-b", "other")  # the hook does run for git itself
    assert (tmp_path / "hook-ran").read_text() == "ran\n"
    (tmp_path / "hook-ran").unlink()
    side = BaseSide.create("HEAD", repo)
    try:
        assert (side.path / "a.txt").read_text() == "a\n"
        assert not (tmp_path / "hook-ran").exists()  # never ran
    finally:
        side.remove()
    assert not side.path.exists()
    # core.hooksPath in the repository's own config is overridden too.
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "post-checkout").write_text(
        (repo / ".git" / "hooks" / "post-checkout").read_text())
    (tmp_path / "hooks" / "post-checkout").chmod(0o755)
    git(repo, "config", "core.hooksPath", str(tmp_path / "hooks"))
    side = BaseSide.create("HEAD", repo)
    side.remove()
    assert not (tmp_path / "hook-ran").exists()


INTERRUPTED = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pytest_dlbench.run.against import _git

    try:
        _git(Path(sys.argv[1]), "slow")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    """
)


def _find(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if marker in " ".join(process.info["cmdline"] or ()):
            found.append(process)
    return found


def _interrupt_once_running(proc: subprocess.Popen[str], marker: str, sig: int, what: str
                            ) -> None:
    """Send ``sig`` once ``sleep MARKER`` runs; the script says "interrupted" (exit 130) and
    nothing of the sleep is left."""
    deadline = time.monotonic() + 30
    while not _find(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _find(f"sleep {marker}"), f"{what} never started"
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130 and out == "interrupted\n"
    assert wait_until(lambda: not _find(f"sleep {marker}"), 10), _find(f"sleep {marker}")


@contextlib.contextmanager
def _left_clean(proc: subprocess.Popen[str], marker: str) -> Iterator[None]:
    """Whatever the test asserts, no ``sleep MARKER`` nor the script is left running."""
    try:
        yield
    finally:
        for left in _find(f"sleep {marker}"):
            left.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_interrupt_while_git_runs_leaves_no_git_process(repo: Path, tmp_path: Path) -> None:
    # A git command that runs a while and starts a child of its own (a hook, a filter does
    # the same): an alias to a shell command.
    marker = f"{41 + os.getpid() % 1000}.5"
    git(repo, "config", "alias.slow", f"!sleep {marker}")
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    proc = subprocess.Popen([sys.executable, str(script), str(repo)], stdout=subprocess.PIPE,
                            text=True)
    with _left_clean(proc, marker):
        # Ctrl-C, to pytest alone (git runs in its own group): git and its child die with it.
        _interrupt_once_running(proc, marker, signal.SIGINT, "git's alias")


SIGTERMED = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pytest_dlbench.plugin.against_setup import _sigterm_interrupts
    from pytest_dlbench.run.against import BaseSide

    try:
        with _sigterm_interrupts():  # as AgainstSetup.check_out makes the worktree
            BaseSide.create("HEAD", Path(sys.argv[1]))
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(130)
    """
)


def test_sigterm_while_the_worktree_is_checked_out_leaves_nothing(repo: Path,
                                                                    tmp_path: Path) -> None:
    # A smudge filter runs inside `git worktree add`, as a hook would: a slow one.
    marker = f"{43 + os.getpid() % 1000}.5"
    git(repo, "config", "filter.slow.smudge", f"sleep {marker}; cat")
    (repo / ".gitattributes").write_text("a.txt filter=slow\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "slow checkout")
    script = tmp_path / "sigtermed.py"
    script.write_text(SIGTERMED)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, str(script), str(repo)], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "TMPDIR": str(scratch)})
    with _left_clean(proc, marker):
        # A cancelled CI job, to pytest alone.
        _interrupt_once_running(proc, marker, signal.SIGTERM, "the checkout's filter")
        assert _find(f"{repo}") == []  # no git command on the repository
        listed = git(repo, "worktree", "list", "--porcelain").splitlines()
        assert [line for line in listed if line.startswith("worktree ")] == [
            f"worktree {repo}"]
        assert list(scratch.iterdir()) == []
