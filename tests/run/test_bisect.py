"""`dlbench bisect` (run/bisect.py, results/judge/paired.judge_paired_run) and a real history across
commits.

The fast tests replace the pytest of each step by a fake that reads which commit its worktree
has; the slow ones autosave a real run of each commit of a scratch repository: five unchanged
commits (`dlbench history` must show no step), and, a release test (`pytest -m release`), ten
commits where one makes a sleep-based benchmark 15 % slower (the step there and only there,
and bisect must name that commit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _bisect_repo import SLOW_COMMIT, fake_steps, make_repo
from _git import git, worktrees

from pytest_dlbench.cli import main
from pytest_dlbench.results.history import bench_series, load_history
from pytest_dlbench.run import bisect as bisect_module
from pytest_dlbench.run.bisect import BisectError, bisect, commits_between


@pytest.mark.parametrize("slow", [1, 5, 9])
def test_binary_search_names_the_first_changed_commit(tmp_path: Path, slow: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=slow)
    tries, judge = fake_steps(monkeypatch, {}, slow)
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", rounds=4,
                    judge=judge, start=repo)
    assert result.first == shas[slow]
    assert result.commits == shas[1:]
    assert tries[0] == (9, 4)  # BAD first, 4 rounds
    assert len(tries) <= 1 + 4  # log2(9) steps after BAD
    assert len(worktrees(repo)) == 1  # every step's worktree removed


def test_unsure_steps_take_more_rounds_then_the_nearer_ratio(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=5)
    # Commit 5 (index 4 of the list) never becomes sure: 4, 8, 16 rounds, then decided by its
    # ratio (0.95: nearer BAD's 0.85 than 1? no: |ln .95 - ln .85| > |ln .95|), so unchanged.
    tries, judge = fake_steps(monkeypatch, {5: ["unsure"]}, slow=6)
    lines: list[Any] = []
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", rounds=4,
                    judge=judge, start=repo, report=lines.append)
    assert [r for i, r in tries if i == 5] == [4, 8, 16]
    step = next(p for p in lines if p.commit == shas[5])
    assert step.rounds == 28 and step.decided_by == "nearer 1 than BAD's ratio"
    assert not step.changed and result.first == shas[6]


def test_no_change_at_bad_and_bad_input(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=99)
    tries, judge = fake_steps(monkeypatch, {}, slow=99)
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy",
                    judge=judge, start=repo)
    assert result.first is None and len(tries) == 1
    with pytest.raises(BisectError, match="not an ancestor"):
        commits_between(repo, shas[5], shas[2])
    with pytest.raises(BisectError, match="no commit between"):
        commits_between(repo, shas[3], shas[3])


def test_worktree_removed_when_a_step_fails(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo")

    def no_run(argv: list[str], cwd: Path, log: Path) -> int:
        log.write_text("ERROR: something broke\n")
        return 4

    monkeypatch.setattr(bisect_module, "_run_pytest", no_run)
    with pytest.raises(BisectError, match="no paired verdict for sleepy.*something broke"):
        bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy",
               judge=lambda run_dir, bench: None, start=repo)
    assert len(worktrees(repo)) == 1

    def interrupted(argv: list[str], cwd: Path, log: Path) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(bisect_module, "_run_pytest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy",
               judge=lambda run_dir, bench: None, start=repo)
    assert len(worktrees(repo)) == 1


def test_dlbench_bisect_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    monkeypatch.chdir(repo)
    assert main(["bisect", shas[0], shas[-1], "-k", "sleepy"]) == 4
    assert "one --bench-suite" in capsys.readouterr().err
    assert main(["bisect", "nope", shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 4
    assert "no such revision" in capsys.readouterr().err
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml"]) == 4  # -k required


# -- real runs ------------------------------------------------------------------------------
def run_pytest(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *args], cwd=repo, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.release
def test_history_and_bisect_find_the_slow_commit(tmp_path: Path, capsys: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo")
    history = tmp_path / "history"
    monkeypatch.setenv("DLBENCH_MACHINE", "scratch")
    for sha in shas:  # a run of each commit, autosaved
        git(repo, "checkout", "-q", sha)
        done = run_pytest(repo, "--bench-suite=s.yaml", "-k", "sleepy",
                          f"--bench-base={tmp_path / 'base'}", f"--bench-autosave={history}")
        assert done.returncode == 0, done.stdout[-2000:]
        assert f"history: {history}" in done.stdout
    git(repo, "checkout", "-q", "main")
    assert main(["history", "--history", str(history), "--json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert [p["commit"] for p in series["points"]] == shas
    (step,) = series["steps"]
    assert (step["from"], step["to"]) == (shas[SLOW_COMMIT - 1], shas[SLOW_COMMIT])
    assert step["ratio"] == pytest.approx(1 / 1.15, rel=0.05)
    # The commits before the slow one: an A/A history of real runs, no step.
    entries, _ = load_history(history)
    (before,) = bench_series([e for e in entries if e.commit in shas[:SLOW_COMMIT]])
    assert len(before.points) == SLOW_COMMIT and before.steps == ()
    # --since: the step is still there from commit 3 on, gone from commit 6 on.
    monkeypatch.chdir(repo)
    assert main(["history", "--history", str(history), "--since", shas[3]]) == 0
    assert f"step at {shas[SLOW_COMMIT - 1][:10]}..{shas[SLOW_COMMIT][:10]}" in \
        capsys.readouterr().out
    assert main(["history", "--history", str(history), "--since", shas[SLOW_COMMIT]]) == 0
    assert "no step" in capsys.readouterr().out

    scratch = set(Path(tempfile.gettempdir()).glob("dlbench-bisect-*"))
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy",
                 "--tolerance", "8%", "--max-rounds", "8"]) == 0
    out = capsys.readouterr().out
    assert f"first changed commit: {shas[SLOW_COMMIT]} commit {SLOW_COMMIT} (slower)" in out
    assert "ratio 0.8" in out and "rounds of paired runs" in out
    assert len(worktrees(repo)) == 1
    assert set(Path(tempfile.gettempdir()).glob("dlbench-bisect-*")) <= scratch


@pytest.mark.slow
def test_a_real_history_of_unchanged_commits_has_no_step(tmp_path: Path, capsys: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Five commits that change nothing the benchmark runs, each run by pytest and autosaved
    through the ini setting. The step sleeps rather than computes: what is checked is that the
    history path (autosave, series, detector) adds no step of its own; a computing benchmark's
    rate moves with the machine's load between runs, which is the saved-baseline gate's
    problem (benchmarks/gate_power.py), not this one's."""
    repo, shas = make_repo(tmp_path / "repo", slow=99, n=5,
                           ini="[pytest]\nbench_autosave = hist\n")
    monkeypatch.setenv("DLBENCH_MACHINE", "scratch")
    for sha in shas:
        git(repo, "checkout", "-q", sha)
        done = run_pytest(repo, "--bench-suite=s.yaml", "-k", "sleepy",
                          f"--bench-base={tmp_path / 'base'}")
        assert done.returncode == 0, done.stdout[-2000:]
    assert main(["history", "--history", str(repo / "hist"), "--json"]) == 0
    (series,) = json.loads(capsys.readouterr().out)["series"]
    assert len(series["points"]) == 5 and series["steps"] == []


def test_dlbench_bisect_interrupted_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", n=3)
    monkeypatch.chdir(repo)

    def interrupted(argv: list[str], cwd: Path, log: Path) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(bisect_module, "_run_pytest", interrupted)
    assert main(["bisect", shas[0], shas[-1], "--bench-suite=s.yaml", "-k", "sleepy"]) == 2
    assert "interrupted (its worktrees are removed)" in capsys.readouterr().err
    assert len(worktrees(repo)) == 1


def test_sigterm_during_bisect_runs_every_finally() -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    cleaned = []
    with pytest.raises(KeyboardInterrupt), bisect_module._terminated_as_interrupt():
        try:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs before the next line
            cleaned.append(False)
        finally:
            cleaned.append(True)
    assert cleaned == [True] and signal.getsignal(signal.SIGTERM) is before


def test_a_killed_bisect_stops_its_step_with_sigterm(tmp_path: Path) -> None:
    """SIGKILL runs no ``finally``: the step's pytest gets SIGTERM from the kernel when bisect
    dies (PR_SET_PDEATHSIG), so it removes its worktree of GOOD as on Ctrl-C, not left running
    until its benchmarks end."""
    import signal
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    marker = tmp_path / "terminated"
    (tmp_path / "test_step.py").write_text(textwrap.dedent(f"""
        import pathlib, signal, time

        def test_step():
            def on_term(signum, frame):
                pathlib.Path({str(marker)!r}).write_text("SIGTERM")
                raise SystemExit(0)
            signal.signal(signal.SIGTERM, on_term)
            pathlib.Path({str(tmp_path / "started")!r}).write_text("")
            time.sleep(60)
    """))
    runner = textwrap.dedent(f"""
        from pathlib import Path
        from pytest_dlbench.run.bisect import _run_pytest
        _run_pytest(["-q", "-p", "no:cacheprovider", "test_step.py"], Path({str(tmp_path)!r}),
                    Path({str(tmp_path / "pytest.log")!r}))
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the step never started"
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.read_text() == "SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_library_and_the_command_take_the_same_rounds() -> None:
    import inspect

    defaults = inspect.signature(bisect).parameters
    # A step's first run is asked for the most rounds: it stops at its first clear look, and
    # one that cannot decide is never run again from its first round (docs/history.md).
    # Unless given, the first run's rounds are the most rounds (--max-rounds 8 alone: 8).
    assert defaults["rounds"].default is None and bisect_module.ROUNDS == 16
    assert defaults["max_rounds"].default == bisect_module.MAX_ROUNDS == 16
    args = _bisect_args(["bisect", "GOOD", "BAD", "-k", "x"])
    assert (args.rounds, args.max_rounds) == (None, 16)


def _bisect_args(argv: list[str]) -> Any:
    from pytest_dlbench.cli import build_parser

    return build_parser().parse_args(argv)


def test_a_step_unsure_at_8_rounds_is_never_run_again_from_its_first_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default step asks for the most rounds at once: the paired run's sequential design
    stops it at its first clear look, so a step that 8 rounds could not decide is one run of up
    to 16, not 8 thrown away and 16 more (docs/history.md, "Rounds of a step")."""
    repo, shas = make_repo(tmp_path / "repo", slow=5)
    tries, judge = fake_steps(monkeypatch, {}, slow=5)
    result = bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy",
                    judge=judge, start=repo)
    assert result.first == shas[5]
    assert {rounds for _, rounds in tries} == {16} and len(tries) == len(result.probes)
    # --max-rounds alone sets the first run's rounds too.
    tries.clear()
    bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", max_rounds=8,
           judge=judge, start=repo)
    assert {rounds for _, rounds in tries} == {8}
    # The old way, still there with --rounds 8: an unsure first run runs again with 16.
    tries_old, judge_old = fake_steps(monkeypatch, {5: ["unsure", "changed"]}, slow=5)
    bisect(shas[0], shas[-1], suite=str(repo / "s.yaml"), bench="sleepy", rounds=8,
           judge=judge_old, start=repo)
    assert [r for i, r in tries_old if i == 5] == [8, 16]
