"""An interrupted `dlbench bisect` resumes from the paired runs it completed (`--resume`,
docs/history.md "Resuming a search").

A bisect whose fake paired runner kills its own process (SIGKILL: no clean-up runs) half-way
through a step, then the same command with `--resume`: the steps completed before the kill are
judged again from their kept runs, not run; the step the kill cut short runs again from its
first round, in a folder of its own; the search names the same commit as one never
interrupted."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _bisect_repo import fake_steps, make_repo
from _git import worktrees

from pytest_dlbench.cli import main
from pytest_dlbench.run.bisect import RECORD, bisect

SLOW = 3  # of six commits: GOOD, then five searched (commit 5 is BAD)

#: A `dlbench bisect` whose paired runner writes each step's run directory and, at its
#: ``kill_at``-th call, SIGKILLs its own process before the run is complete.
KILLED_MIDWAY = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from pytest_dlbench.cli import main
    from pytest_dlbench.results.judge import paired
    from pytest_dlbench.results.judge.paired import Judgement
    from pytest_dlbench.run import bisect

    calls, kill_at, slow = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

    def run_pytest(argv, cwd, log):
        index = int((cwd / "notes.txt").read_text().split()[1])
        base = Path(next(a for a in argv if a.startswith("--bench-base=")).split("=", 1)[1])
        run = base / "runs" / "x.1"
        run.mkdir(parents=True)
        log.write_text("running\\n")
        with calls.open("a") as out:
            out.write(f"{index}\\n")
        if len(calls.read_text().split()) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)  # half-way: the run has no verdict yet
        (run / "commit").write_text(str(index))
        return 0

    def judge(run_dir, bench, **_):
        index = int((Path(run_dir) / "commit").read_text())
        ratio = 0.85 if index >= slow else 1.0
        return Judgement("changed" if index >= slow else "same", ratio,
                         (ratio - 0.02, ratio + 0.02), None, 4, "")

    bisect._run_pytest = run_pytest
    paired.judge_paired_run = judge
    sys.exit(main(sys.argv[4:]))
    """
)


def _judge_by_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's judge reads the commit the fake runner wrote (test_bisect.fake_steps)."""
    from pytest_dlbench.results.judge import Judgement

    def judge(run_dir: Any, bench: str, **_: Any) -> Judgement:
        index = int((Path(run_dir) / "commit").read_text())
        ratio = 0.85 if index >= SLOW else 1.0
        return Judgement("changed" if index >= SLOW else "same", ratio,
                         (ratio - 0.02, ratio + 0.02), None, 4, "")

    monkeypatch.setattr("pytest_dlbench.results.judge.paired.judge_paired_run", judge)


def test_a_killed_bisect_resumes_from_its_completed_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=SLOW, n=6)
    calls = tmp_path / "calls"
    command = ["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]
    # BAD (5), then commit 2 (unchanged), then commit 3: killed while it runs.
    killed = subprocess.run([sys.executable, "-c", KILLED_MIDWAY, str(calls), "3", str(SLOW),
                             *command], cwd=repo, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert calls.read_text().split() == ["5", "2", "3"]
    (folder,) = (repo / ".dlbench" / "bisect").glob("sleepy.*")
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == [
        f"1-{shas[5][:10]}-16r", f"2-{shas[2][:10]}-16r", f"3-{shas[3][:10]}-16r"]

    monkeypatch.chdir(repo)
    tries, _ = fake_steps(monkeypatch, {}, slow=SLOW)
    _judge_by_commit(monkeypatch)
    assert main([*command, "--resume"]) == 0
    out = capsys.readouterr().out
    assert "bisect: resuming that search: 2 paired runs it completed, judged again" in out
    assert tries == [(3, 16)]  # only the step the kill cut short ran again
    assert f"first changed commit: {shas[SLOW]} commit {SLOW} (slower)" in out
    assert f"{shas[5][:10]} changed   ratio 0.850 [0.830, 0.870] (4 rounds, kept)" in out
    # The cut-short run stays beside the new one, which the record names.
    assert (folder / f"3-{shas[3][:10]}-16r").is_dir()
    assert (folder / f"3-{shas[3][:10]}-16r-2" / "runs" / "x.1" / "commit").is_file()
    named = [r["step"] for r in json.loads((folder / RECORD).read_text())["runs"]]
    assert named == [f"1-{shas[5][:10]}-16r", f"2-{shas[2][:10]}-16r", f"3-{shas[3][:10]}-16r-2"]
    assert len(worktrees(repo)) == 1  # the killed one's worktree removed as the search began


def test_resume_needs_the_same_search_and_says_when_there_is_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=SLOW, n=6)
    tries, judge = fake_steps(monkeypatch, {}, slow=SLOW)
    first = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", judge=judge,
                   start=repo)
    assert first.first == shas[SLOW] and len(tries) == 3
    # Another BAD is another search: nothing of the first is read, a new folder is made.
    other = bisect(shas[0], shas[-2], suite=str(repo / "s.yaml"), bench="sleepy", judge=judge,
                   start=repo, resume=True)
    assert other.folder != first.folder and len(tries) == 3 + 3
    # The same search again, resumed: every step read from its kept run, none run.
    again = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", judge=judge,
                   start=repo, resume=True)
    assert again.folder == first.folder and again.first == first.first and len(tries) == 6
    assert all(p.kept == 1 for p in again.probes)
    # Without --resume a search starts afresh, and the command says when there is none.
    monkeypatch.chdir(repo)
    _judge_by_commit(monkeypatch)
    assert main(["bisect", shas[1], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy",
                 "--resume"]) == 0
    out = capsys.readouterr().out
    assert "bisect: no kept search of these commits and benchmark to resume: a new one" in out
