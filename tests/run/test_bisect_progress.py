"""`dlbench bisect` says where it stands and keeps what it measured (issue 41 item 6), and
refuses what it cannot do (issue 40 item 16).

Each step's pytest is replaced by a fake paired runner (_bisect_repo.fake_steps' judge, or one
here that writes a run directory round by round and waits until a progress report has seen
each round: nothing depends on how fast this machine is)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _bisect_repo import FakeVerdict, fake_steps, make_repo
from _git import worktrees
from _hostile_cases import BISECT_CASES

from pytest_dlbench.cli import main
from pytest_dlbench.run import bisect as bisect_module
from pytest_dlbench.run.bisect import BisectError, Progress, bisect, max_steps


class RoundByRound:
    """A paired runner that writes each round's two streams, then waits until a progress
    report has seen that round; the run's last file says the verdict."""

    def __init__(self, slow: int) -> None:
        self.slow = slow
        self.reports: list[Progress] = []
        self.seen = threading.Condition()

    def progress(self, now: Progress) -> None:
        with self.seen:
            self.reports.append(now)
            self.seen.notify_all()

    def wait_for(self, commit: str, round_: int) -> None:
        with self.seen:
            assert self.seen.wait_for(lambda: any(
                p.commit == commit and p.round == round_ for p in self.reports), timeout=60), \
                f"no progress report of round {round_} of {commit[:10]}"

    def run_pytest(self, argv: list[str], cwd: Path, log: Path) -> int:
        rounds = int(next(a for a in argv if a.startswith("--bench-rounds=")).split("=")[1])
        base = Path(next(a for a in argv if a.startswith("--bench-base=")).split("=", 1)[1])
        commit = _head(cwd)
        index = int((cwd / "notes.txt").read_text().split()[1])
        run = base / "runs" / "s.20260101-000000"
        (run / "base").mkdir(parents=True)
        for r in range(rounds):
            for side in (run, run / "base"):
                (side / f"sleepy.D0.R{r}.data").write_text("")
            self.wait_for(commit, r + 1)
        (run / "verdict").write_text("changed" if index >= self.slow else "same")
        log.write_text("ran\n")
        return 0

    @staticmethod
    def judge(run_dir: Path, bench: str) -> FakeVerdict:
        done = run_dir / "verdict"
        pairs = len(list((run_dir / "base").glob("*.data"))) - 1  # the last one is under way
        if not done.exists():  # read while it runs: a ratio so far
            return FakeVerdict("unsure", 0.9, (0.8, 1.0), pairs=pairs)
        word = done.read_text()
        return FakeVerdict(word, 0.85 if word == "changed" else 1.0, (0.8, 0.9), pairs=pairs + 1)


def _head(worktree: Path) -> str:
    return subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_most_steps_a_search_may_take() -> None:
    assert [max_steps(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 3, 3, 4, 4, 5]


def test_progress_while_a_step_runs_names_step_commit_round_and_ratio(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=3, n=5)
    runner = RoundByRound(slow=3)
    monkeypatch.setattr(bisect_module, "_run_pytest", runner.run_pytest)
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", rounds=4,
                    judge=runner.judge, start=repo, keep=tmp_path / "base",
                    progress=runner.progress, every=0.01)
    assert result.first == shas[3]
    first = [p for p in runner.reports if p.step == 1]
    assert {p.commit for p in first} == {shas[-1]} and all(p.bad for p in first)
    assert {p.max_steps for p in runner.reports} == {3}  # BAD, then 2 over 4 commits
    assert {p.round for p in first} >= {1, 2, 3, 4} and {p.rounds for p in first} == {4}
    # Once a pair of rounds is done, the ratio and its interval so far.
    later = [p for p in first if p.round >= 2]
    assert later and all(p.ratio == 0.9 and p.ci == (0.8, 1.0) and p.pairs >= 1 for p in later)
    assert all(p.ratio is None for p in first if p.round == 1)
    assert all(p.run_dir is not None and p.run_dir.is_dir() for p in first if p.round)
    assert {p.step for p in runner.reports} == {1, 2, 3}
    assert len(worktrees(repo)) == 1


def test_each_steps_run_is_kept_in_the_results_base(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=5)
    tries, judge = fake_steps(monkeypatch, {5: ["unsure", "same"]}, slow=6)
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", rounds=4,
                    judge=judge, start=repo, keep=tmp_path / "base")
    assert result.folder is not None
    assert result.folder.parent == (tmp_path / "base" / "bisect").resolve()
    assert result.folder.name.startswith("sleepy.")
    kept = [run for probe in result.probes for run in probe.run_dirs]
    assert len(kept) == len(tries)  # one run directory per paired run, retries included
    for probe in result.probes:
        for (rounds, _), run in zip(probe.runs, probe.run_dirs, strict=True):
            assert run.is_dir() and (run / "commit").is_file()  # what the step wrote
            step = run.parent.parent
            assert step.parent == result.folder
            assert step.name.endswith(f"-{probe.commit[:10]}-{rounds}r")
            assert (step / "pytest.log").read_text() == "ran\n"
    retried = next(p for p in result.probes if p.commit == shas[5])
    assert [r for r, _ in retried.runs] == [4, 8] and len(retried.run_dirs) == 2


def test_the_default_results_base_is_where_bisect_runs(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    fake_steps(monkeypatch, {}, slow=1)
    monkeypatch.delenv("DLBENCH_BASE", raising=False)
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy",
                    judge=fake_steps(monkeypatch, {}, slow=1)[1], start=repo)
    assert result.folder is not None and result.folder.parent == repo / ".dlbench" / "bisect"


def test_dlbench_bisect_prints_its_plan_progress_and_where_each_run_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=3, n=5)
    monkeypatch.chdir(repo)
    monkeypatch.setattr(bisect_module, "PROGRESS_S", 0.01)
    printed: list[str] = []

    def run_pytest(argv: list[str], cwd: Path, log: Path) -> int:
        base = Path(next(a for a in argv if a.startswith("--bench-base=")).split("=", 1)[1])
        index = int((cwd / "notes.txt").read_text().split()[1])
        run = base / "runs" / "s.20260101-000000"
        run.mkdir(parents=True)
        (run / "sleepy.D0.R0.data").write_text("")
        deadline = time.monotonic() + 60
        while not any("round 1 of 16" in line for line in printed):  # one report seen
            assert time.monotonic() < deadline, "no progress line"
            printed.extend(capsys.readouterr().out.splitlines())
            time.sleep(0.01)
        (run / "verdict").write_text("changed" if index >= 3 else "same")
        return 0

    def judge(run_dir: Path, bench: str) -> FakeVerdict | None:
        done = run_dir / "verdict"
        if not done.exists():
            return None
        word = done.read_text()
        return FakeVerdict(word, 0.85 if word == "changed" else 1.0, (0.83, 0.87), pairs=4)

    monkeypatch.setattr(bisect_module, "_run_pytest", run_pytest)
    monkeypatch.setattr("pytest_dlbench.results.judge.paired.judge_paired_run",
                        lambda run_dir, bench, **_: judge(Path(run_dir), bench))
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy",
                 "--bench-base", "kept"]) == 0
    out = printed + capsys.readouterr().out.splitlines()
    (plan,) = [line for line in out if line.startswith("bisect: ")]
    assert plan.startswith(f"bisect: 4 commits after {shas[0]} up to {shas[-1]}, at most 3 "
                           "steps (BAD first); each step's run kept in kept/bisect/sleepy.")
    live = [line for line in out if line.startswith("  step ")]
    assert any(re.fullmatch(rf"  step 1 of at most 3: BAD {shas[-1][:10]} round 1 of 16, "
                            r"\dm\d\ds", line) for line in live), live
    steps = [i for i, line in enumerate(out) if line.startswith(tuple(s[:10] for s in shas))]
    assert len(steps) == 3
    # 16 rounds asked (the default), 4 taken: a paired run stops once its verdict is clear.
    assert all(" (4 rounds)  commit " in out[i] for i in steps), [out[i] for i in steps]
    for i in steps:  # each step's line, then where its run is
        run = out[i + 1]
        assert run.startswith("  run: kept/bisect/sleepy.") and run.endswith(
            "/runs/s.20260101-000000")
        assert (repo / run.split(": ", 1)[1]).is_dir()
    assert f"first changed commit: {shas[3]} commit 3 (slower)" in out
    # The end: the commits measured, oldest first, as a small table.
    table = out[out.index(f"commits measured against {shas[0]}, oldest first:") + 1:]
    assert table[0].split() == ["commit", "ratio", "interval", "verdict", "rounds"]
    assert [row.split()[0] for row in table[1:4]] == [shas[2][:10], shas[3][:10], shas[4][:10]]
    assert table[1].split()[1:] == ["1.000", "[0.830,", "0.870]", "unchanged", "4"]
    assert table[2].split()[1:] == ["0.850", "[0.830,", "0.870]", "changed", "4", "first",
                                    "changed"]


# The rows of docs/running.md's "Bad input" table these tests check (tests/_hostile_cases.py).
@pytest.mark.parametrize("case", BISECT_CASES, ids=lambda c: c[0])
def test_bisect_bad_input_rows(case: tuple[str, str, str], tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    what, _, message = case
    repo, shas = make_repo(tmp_path / "repo", n=3)
    monkeypatch.chdir(repo)
    tries, _ = fake_steps(monkeypatch, {}, slow=1)
    args = {BISECT_CASES[0][0]: ["--", "--upload-pack=x", shas[-1]],
            BISECT_CASES[1][0]: [shas[0], shas[-1], "--rounds", "8", "--max-rounds", "2"]}[what]
    assert main(["bisect", "--bench-suite=s.yaml", "-k", "sleepy", *args]) == 4
    assert capsys.readouterr().err == f"dlbench: error: {message}\n"
    assert tries == []

@pytest.mark.parametrize("which", ["GOOD", "BAD"])
def test_a_revision_that_looks_like_an_option_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, which: str) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    monkeypatch.chdir(repo)
    tries, _ = fake_steps(monkeypatch, {}, slow=1)
    revs = ["--upload-pack=x", shas[-1]] if which == "GOOD" else [shas[0], "-x"]
    assert main(["bisect", "--bench-suite=s.yaml", "-k", "sleepy", "--", *revs]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    rev = revs[0] if which == "GOOD" else revs[1]
    assert err == [f"dlbench: error: {which} {rev!r} is not a revision (a revision may not "
                   "start with '-')"]
    assert tries == [] and not (repo / ".dlbench").exists()


def test_a_missing_revision_is_named_as_bisect_names_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    monkeypatch.chdir(repo)
    assert main(["bisect", "nope", shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 4
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("dlbench: error: GOOD nope: no such revision") and \
        "--bench-against" not in line


def test_more_first_rounds_than_the_most_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    monkeypatch.chdir(repo)
    tries, _ = fake_steps(monkeypatch, {}, slow=1)
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy",
                 "--max-rounds", "2", "--rounds", "8"]) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["dlbench: error: --rounds 8 is more than --max-rounds 2: a step's first "
                   "paired run cannot take more rounds than any may"]
    assert tries == []
    with pytest.raises(BisectError, match="more than --max-rounds"):
        bisect(shas[0], shas[-1], suite="s.yaml", bench="sleepy", judge=lambda r, b: None,
               start=repo, rounds=16, max_rounds=8)


KILLED = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pytest_dlbench.cli import main
    from pytest_dlbench.run import bisect

    def stuck(argv, cwd, log):  # a step that never ends
        log.write_text("running\\n")
        Path(sys.argv[1]).write_text("in a step")
        time.sleep(3600)

    bisect._run_pytest = stuck
    sys.exit(main(sys.argv[2:]))
    """
)


def test_a_sigkilled_bisect_leaves_nothing_in_the_temporary_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its step's run is kept in the results base; its worktree (locked by its pid) is
    removed by the next bisect; nothing of it stays in the temporary directory."""
    repo, shas = make_repo(tmp_path / "repo", n=3)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    marker = tmp_path / "in-step"
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(marker), "bisect", shas[0],
                             shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"],
                            cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()[0].decode()[-2000:]
            assert time.monotonic() < deadline, "the bisect never reached its first step"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    left = sorted(p.name for p in tmp.iterdir())
    assert not [name for name in left if name.startswith("dlbench-bisect-")], left
    (step,) = (repo / ".dlbench" / "bisect").glob("sleepy.*/1-*-16r")
    assert (step / "pytest.log").read_text() == "running\n"  # kept
    assert len(worktrees(repo)) == 2  # the killed one's worktree, until the next run

    monkeypatch.chdir(repo)
    fake_steps(monkeypatch, {}, slow=1)
    monkeypatch.setattr("pytest_dlbench.results.judge.paired.judge_paired_run",
                        lambda run_dir, bench, **_: FakeVerdict("changed", 0.85, (0.8, 0.9), 4))
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 0
    assert len(worktrees(repo)) == 1
    assert not [p for p in tmp.iterdir() if p.name.startswith("dlbench-")]


def test_a_closed_output_stops_the_progress_lines_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """`dlbench bisect | head`: the progress thread stops printing, with no thread traceback."""
    failures: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", failures.append)
    calls: list[int] = []
    called = threading.Event()

    def tick() -> None:
        calls.append(1)
        called.set()
        raise BrokenPipeError(32, "Broken pipe")

    with bisect_module._every(0.001, tick):
        assert called.wait(timeout=60)
    assert calls == [1] and failures == []


def test_on_a_terminal_the_progress_line_is_rewritten_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    repo, shas = make_repo(tmp_path / "repo", slow=1, n=2)
    monkeypatch.chdir(repo)
    monkeypatch.setattr(bisect_module, "PROGRESS_S", 0.01)
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)

    def run_pytest(argv: list[str], cwd: Path, log: Path) -> int:
        base = Path(next(a for a in argv if a.startswith("--bench-base=")).split("=", 1)[1])
        run = base / "runs" / "s.20260101-000000"
        run.mkdir(parents=True)
        (run / "sleepy.D0.R0.data").write_text("")
        deadline = time.monotonic() + 60
        while "\r\x1b[K  step " not in screen.getvalue():
            assert time.monotonic() < deadline, "no progress line"
            time.sleep(0.01)
        (run / "verdict").write_text("changed")
        return 0

    monkeypatch.setattr(bisect_module, "_run_pytest", run_pytest)
    monkeypatch.setattr("pytest_dlbench.results.judge.paired.judge_paired_run",
                        lambda run_dir, bench, **_: FakeVerdict("changed", 0.85, (0.8, 0.9), 6)
                        if (Path(run_dir) / "verdict").exists() else None)
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 0
    text = screen.getvalue()
    # Each progress report overwrites the line; the step's line clears it first.
    assert f"\r\x1b[K{shas[-1][:10]} changed " in text
    live = text.split("\n")[1]  # after the plan line: the reports, then the step's line
    assert live.startswith("\r\x1b[K  step 1 of at most 1: BAD ")
    assert live.count("\r\x1b[K  step 1 of at most 1: BAD ") >= 1 and "\n" not in live
    assert text.endswith(")\n")  # the last line ends the output cleanly
