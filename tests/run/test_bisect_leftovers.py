"""A ``dlbench bisect`` killed outright leaves its worktrees (issue 51, item 15): it names them in
``<git dir>/dlbench-bisect/`` while it runs, and the next bisect removes, as it starts, what a
bisect that is gone left (its own worktree and its step's worktree of GOOD); never a live
bisect's, another machine's or the user's own (docs/history.md, "A killed bisect")."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from _bisect_repo import FakeVerdict, fake_steps, make_repo
from _git import git, worktrees

from pytest_dlbench.cli import main
from pytest_dlbench.results.judge import paired
from pytest_dlbench.run import bisect as bisect_module
from pytest_dlbench.run.against import LOCK_REASON, WORKTREE_PREFIX
from pytest_dlbench.run.bisect import LEFTOVERS, remove_leftovers

#: A bisect whose first step never ends; the step, as a real step's pytest does, checks GOOD out
#: in a worktree of its own (locked by its pid), then says so and waits.
KILLED = textwrap.dedent(
    """
    import subprocess, sys, time
    from pathlib import Path
    from pytest_dlbench.cli import main
    from pytest_dlbench.run import bisect

    STEP = (
        "import sys, time; from pathlib import Path; "
        "from pytest_dlbench.run.against import BaseSide; "
        "BaseSide.create('HEAD~2', Path.cwd()); "
        "Path(sys.argv[1]).write_text('in a step'); time.sleep(3600)"
    )

    def stuck(argv, cwd, log):
        log.write_text("running\\n")
        subprocess.run([sys.executable, "-c", STEP, sys.argv[1]], cwd=cwd)

    bisect._run_pytest = stuck
    sys.exit(main(sys.argv[2:]))
    """
)


def _host() -> str:
    return bisect_module._host()


def _dead_pid() -> int:
    """The pid of a process that has exited (reaped)."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _worktree(repo: Path, where: Path, *, lock_pid: int | None = None) -> Path:
    args = ["worktree", "add", "--detach", "--quiet"]
    if lock_pid is not None:
        args += ["--lock", "--reason", LOCK_REASON.format(pid=lock_pid,
                                                          host=socket.gethostname())]
    git(repo, *args, str(where), "HEAD")
    return where


def _registry(repo: Path, name: str, **record: Any) -> Path:
    folder = repo / ".git" / LEFTOVERS
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"version": 1, **record}))
    return path


@pytest.mark.slow
def test_the_next_bisect_removes_what_a_sigkilled_one_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = tmp_path / "in-step"
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(marker), "bisect", shas[0],
                             shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"],
                            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[0].decode()[-2000:]
            assert time.monotonic() < deadline, "the bisect never reached its first step"
            time.sleep(0.05)
        (registry,) = (repo / ".git" / LEFTOVERS).glob("*.json")
        named = json.loads(registry.read_text())
        assert named["pid"] == proc.pid and len(named["worktrees"]) == 1
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the bisect and its step: nothing cleans up
        proc.communicate(timeout=60)
    assert len(worktrees(repo)) == 3  # the user's, the bisect's and its step's
    assert registry.exists()
    # The step was orphaned: it is gone once the system has reaped it.
    listing = git(repo, "worktree", "list", "--porcelain")
    (step_pid,) = {int(pid) for pid in re.findall(r"pid (\d+) on", listing)} - {proc.pid}
    deadline = time.monotonic() + 60
    while Path(f"/proc/{step_pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)

    # The next bisect removes both as it starts, though it stops before a step of its own.
    monkeypatch.chdir(repo)
    monkeypatch.setenv("TMPDIR", str(tmp))
    assert main(["bisect", shas[-1], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 4
    assert "no commit between" in capsys.readouterr().err
    assert len(worktrees(repo)) == 1
    assert not [p for p in tmp.iterdir() if p.name.startswith(WORKTREE_PREFIX)]
    assert not registry.exists()


def test_a_gone_bisects_worktree_is_removed_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """A bisect gone whose pid now runs another process (this one, started at another time):
    its worktree's lock names a live pid, and only the registry tells that it is stale."""
    repo, shas = make_repo(tmp_path / "repo", n=3)
    left = _worktree(repo, tmp_path / f"{WORKTREE_PREFIX}left", lock_pid=os.getpid())
    started = bisect_module._process_start(os.getpid())
    assert started is not None
    registry = _registry(repo, f"{_host()}-{os.getpid()}", host=_host(), pid=os.getpid(),
                         started=started - 1, worktrees=[str(left)])
    monkeypatch.chdir(repo)
    fake_steps(monkeypatch, {}, slow=1)
    # The module object the command imports (a string target may reach a copy that an
    # in-process pytester run took out of sys.modules).
    monkeypatch.setattr(paired, "judge_paired_run",
                        lambda run_dir, bench, **_: FakeVerdict("same", 1.0, (0.98, 1.02), 4))
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 0
    out = capsys.readouterr().out
    assert f"bisect: removed {left}, a worktree a killed run left" in out
    assert len(worktrees(repo)) == 1 and not left.exists()
    assert not registry.exists()
    assert not list((repo / ".git" / LEFTOVERS).glob("*.json"))  # this run's own file is gone


def test_a_live_bisects_another_machines_and_the_users_worktrees_stay(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path / "repo", n=2)
    live = _worktree(repo, tmp_path / f"{WORKTREE_PREFIX}live", lock_pid=os.getpid())
    remote = _worktree(repo, tmp_path / f"{WORKTREE_PREFIX}remote")
    mine = _worktree(repo, tmp_path / "my-feature")  # the user's own
    dead = _dead_pid()
    kept = [
        _registry(repo, "live", host=_host(), pid=os.getpid(),
                  started=bisect_module._process_start(os.getpid()), worktrees=[str(live)]),
        _registry(repo, "remote", host="another-machine", pid=dead, started=1,
                  worktrees=[str(remote)]),
    ]
    gone = _registry(repo, "gone", host=_host(), pid=dead, started=1,
                     worktrees=[str(mine), str(repo), "/etc"])
    assert remove_leftovers(repo) == []
    assert all(p.exists() for p in kept) and not gone.exists()
    assert len(worktrees(repo)) == 4 and live.is_dir() and remote.is_dir() and mine.is_dir()
    assert (repo / "s.yaml").is_file()


def test_a_registry_that_is_not_json_is_left_as_it_is(tmp_path: Path) -> None:
    repo, _ = make_repo(tmp_path / "repo", n=2)
    folder = repo / ".git" / LEFTOVERS
    folder.mkdir()
    (folder / "x.json").write_text("{not json")
    (folder / "y.json").write_text('["a list"]')
    assert remove_leftovers(repo) == []
    assert sorted(p.name for p in folder.iterdir()) == ["x.json", "y.json"]
