"""``dlbench bisect`` of a test of your own that uses the ``bench`` fixture: a node id, or a test
file with ``-k``; each step runs the commit's test through the fixture's paired rounds
(run/bisect.py ``Target``, plugin/fixture_against.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from _bisect_repo import fake_steps
from _git import git, worktrees

from pytest_dlbench.cli import main
from pytest_dlbench.run import bisect as bisect_module
from pytest_dlbench.run.bisect import BisectError, bisect

TEST = textwrap.dedent(
    """
    import time

    import pytest

    FACTOR = {factor}


    @pytest.mark.bench_steps(warmup=1, steps=6)
    def test_step(bench):
        for _ in bench.iterate(range(1000), batch_size=1):
            time.sleep(0.02 * FACTOR)


    def test_plain():
        pass
    """
)


def make_repo(path: Path, slow: int, n: int, factor: float = 1.5) -> tuple[Path, list[str]]:
    """``n`` commits of tests/test_train.py; from commit ``slow`` on its step is slower."""
    (path / "tests").mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "pytest.ini").write_text("[pytest]\n")
    shas = []
    for i in range(n):
        (path / "tests" / "test_train.py").write_text(
            TEST.format(factor=factor if i >= slow else 1.0))
        (path / "notes.txt").write_text(f"commit {i}\n")
        git(path, "add", "-A")
        git(path, "commit", "-qm", f"commit {i}" + (" (slower)" if i == slow else ""))
        shas.append(git(path, "rev-parse", "HEAD"))
    return path, shas


def test_a_node_id_runs_that_test_in_each_steps_worktree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=3, n=6)
    tries, judge = fake_steps(monkeypatch, {}, slow=3)
    argvs: list[tuple[list[str], Path]] = []
    run = bisect_module._run_pytest
    monkeypatch.setattr(bisect_module, "_run_pytest",
                        lambda argv, cwd, log: argvs.append((argv, cwd)) or run(argv, cwd, log))
    judged: list[str] = []

    def judge_named(run_dir: Path, bench: str) -> Any:
        judged.append(bench)
        return judge(run_dir, bench)

    result = bisect(shas[0], shas[-1], test="tests/test_train.py::test_step", rounds=4,
                    judge=judge_named, start=repo)
    assert result.first == shas[3] and result.bench == "test_step"
    assert set(judged) == {"test_step"}
    for argv, cwd in argvs:
        # The test as it is at the step's commit, in the step's worktree, not this tree's.
        assert argv[0] == f"{cwd}/tests/test_train.py::test_step"
        assert "--bench-suite" not in " ".join(argv) and "-k" not in argv
        assert f"--bench-against={shas[0]}" in argv
    assert len(worktrees(repo)) == 1


def _streams(names: list[str]) -> Any:
    """A fake step's pytest that writes a stream of each of ``names`` in its run."""
    def run_pytest(argv: list[str], cwd: Path, log: Path) -> int:
        base = Path(next(a for a in argv if a.startswith("--bench-base=")).split("=", 1)[1])
        run = base / "runs" / "tests.1"
        (run / "base").mkdir(parents=True)
        for name in names:
            (run / f"{name}.D0.R0.data").write_text("")
            (run / "base" / f"{name}.D0.R0.data").write_text("")
        (run / "commit").write_text((cwd / "notes.txt").read_text().split()[1])
        log.write_text("ran\n")
        return 0
    return run_pytest


def test_a_file_with_k_follows_the_one_test_it_selects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=2, n=4)
    _, judge = fake_steps(monkeypatch, {}, slow=2)
    monkeypatch.setattr(bisect_module, "_run_pytest", _streams(["test_step"]))
    judged: list[str] = []
    result = bisect(shas[0], shas[-1], test="tests/test_train.py", bench="step", rounds=4,
                    judge=lambda run_dir, bench: judged.append(bench) or judge(run_dir, bench),
                    start=repo)
    assert result.first == shas[2] and result.bench == "test_step"
    assert set(judged) == {"test_step"}
    (folder,) = (repo / ".dlbench" / "bisect").iterdir()
    assert folder.name.startswith("test_train.")  # named before the test is known


def test_a_k_that_selects_two_tests_is_one_line(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=2, n=4)
    _, judge = fake_steps(monkeypatch, {}, slow=2)
    monkeypatch.setattr(bisect_module, "_run_pytest", _streams(["test_a", "test_b"]))
    with pytest.raises(BisectError, match=r"tests/test_train.py -k test: 2 tests use the bench "
                                          r"fixture \(test_a, test_b\); bisect follows one"):
        bisect(shas[0], shas[-1], test="tests/test_train.py", bench="test", judge=judge,
               start=repo)
    assert len(worktrees(repo)) == 1


def test_dlbench_bisect_of_a_test_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=1, n=3)
    monkeypatch.chdir(repo)
    ran: list[Any] = []
    monkeypatch.setattr(bisect_module, "_run_pytest", lambda *a: ran.append(a) or 4)
    cases = [
        (["tests/test_train.py::test_step", "--test", "tests/test_train.py"],
         "one test: TEST or --test, not both"),
        (["tests/test_train.py::test_step", "--bench-suite=s.yaml", "-k", "x"],
         "or a test that uses the bench fixture, not both"),
        (["--bench-suite=s.yaml"], "bisect --bench-suite needs -k BENCH"),
        ([str(tmp_path / "elsewhere.py")], "not in the repository"),
        (["tests/test_train.py::test_step", "--bench-fixture-steps=1"], "--bench-fixture-steps"),
    ]
    for args, line in cases:
        assert main(["bisect", shas[0], shas[-1], *args]) == 4, args
        err = capsys.readouterr().err
        assert line in err, (args, err)
        assert len([li for li in err.splitlines() if "error" in li]) == 1, err
    assert ran == [] and len(worktrees(repo)) == 1


def test_dlbench_bisect_passes_the_steps_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: Any) -> None:
    repo, shas = make_repo(tmp_path / "repo", slow=99, n=2)
    monkeypatch.chdir(repo)
    _, judge = fake_steps(monkeypatch, {}, slow=99)
    argvs: list[list[str]] = []
    run = bisect_module._run_pytest
    monkeypatch.setattr(bisect_module, "_run_pytest",
                        lambda argv, cwd, log: argvs.append(argv) or run(argv, cwd, log))
    monkeypatch.setattr("pytest_dlbench.results.judge.paired.judge_paired_run",
                        lambda run_dir, bench, **kw: judge(run_dir, bench))
    assert main(["bisect", shas[0], shas[-1], "--test", "tests/test_train.py::test_step",
                 "--bench-fixture-steps=2,9"]) == 0
    assert "is not beyond the tolerance" in capsys.readouterr().out
    (argv,) = argvs
    assert "--bench-fixture-steps=2,9" in argv


@pytest.mark.slow
@pytest.mark.release
def test_bisect_finds_the_commit_that_slowed_a_test(tmp_path: Path, capsys: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Real steps: each a ``pytest NODEID --bench-against=GOOD`` in the commit's worktree, whose
    rounds are the fixture's children; the step sleeps 50 % longer from commit 2 on."""
    repo, shas = make_repo(tmp_path / "repo", slow=2, n=4)
    monkeypatch.chdir(repo)
    assert main(["bisect", shas[0], shas[-1], "tests/test_train.py::test_step",
                 "--rounds", "6", "--max-rounds", "6"]) == 0
    out = capsys.readouterr().out
    assert f"first changed commit: {shas[2]} commit 2 (slower)" in out, out
    assert "  test_step: ratio 0.6" in out, out
    assert len(worktrees(repo)) == 1
    # Each step's run is kept, its streams the fixture's: the test's rounds on both sides.
    (folder,) = (repo / ".dlbench" / "bisect").iterdir()
    assert folder.name.startswith("test_step.")
    streams = sorted(p.name for p in folder.glob("1-*/runs/*/test_step.D0.R*.data"))
    assert streams and streams[0] == "test_step.D0.R0.data"
