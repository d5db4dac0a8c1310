"""A ``bench`` fixture test under ``--bench-against`` shows its rounds as they go: a line per
round with both sides' rates, the live line over both sides' children, and the early stop of
the sequential design (plugin/fixture_against.py, plugin/progress.py)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from _git import git

from pytest_dlbench.plugin import progress
from pytest_dlbench.plugin.progress import ProgressReporter, round_line

TESTS = textwrap.dedent(
    """
    import time

    import pytest

    @pytest.mark.bench_steps(warmup=1, steps=6)
    def test_fast(bench):
        for _ in bench.iterate(range(100), batch_size=4):
            time.sleep(0.002)
    """
)


def _repo(pytester: pytest.Pytester, tests: str = TESTS, candidate: str | None = None) -> None:
    pytester.makepyfile(test_dl=tests)
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "test_dl.py")
    git(pytester.path, "commit", "-q", "-m", "base")
    if candidate is not None:
        (pytester.path / "test_dl.py").write_text(candidate)


def write(path: Path, *records: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def stream(path: Path, value: float, *, status: str = "ok", reason: str = "") -> Path:
    write(path, {"event": "config", "spec": {"name": "t", "skip": 0, "stop": 2}, "device": 0},
          *[{"event": "rate", "value": value, "items": value, "seconds": 1.0, "step": i,
             "warmup": False} for i in range(2)],
          {"event": "end", "status": status, "reason": reason})
    return path


def test_a_rounds_line_has_both_sides_in_their_order(tmp_path: Path) -> None:
    base = stream(tmp_path / "base" / "t.D0.R1.data", 2000.0)
    candidate = stream(tmp_path / "t.D0.R1.data", 1900.0)
    line = round_line("t[D0-R1]", 1, 10, [("candidate", candidate), ("base", base)], 14.2)
    assert line == ("dlbench: t[D0-R1] round 2 of 10: candidate 1,900 items/s, base 2,000 "
                    "items/s in 14s")


def test_a_failed_side_says_why(tmp_path: Path) -> None:
    base = stream(tmp_path / "base" / "t.D0.R0.data", 2000.0)
    candidate = stream(tmp_path / "t.D0.R0.data", 10.0, status="fail",
                       reason="AssertionError: boom")
    line = round_line("t[D0-R0]", 0, 2, [("base", base), ("candidate", candidate)], 3.0)
    assert line == ("dlbench: t[D0-R0] round 1 of 2: base 2,000 items/s, candidate failed: "
                    "fail: AssertionError: boom in 3s")
    missing = round_line("t[D0-R0]", 0, 2, [("base", tmp_path / "none.D0.R0.data")], 1.0)
    assert missing.startswith("dlbench: t[D0-R0] round 1 of 2: base failed: fail: unreadable")


def test_the_live_line_follows_the_base_sides_children(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "QUIET_FOR_S", 0.0)
    write(tmp_path / "base" / "t.D0.R0.data",
          {"event": "config", "spec": {"name": "t", "skip": 0, "stop": 4}, "device": 0},
          {"event": "rate", "value": 8.0, "items": 4, "seconds": 0.5})
    only_candidate = ProgressReporter(lambda: tmp_path, clock=lambda: 1.0)
    assert only_candidate.running() == []
    both = ProgressReporter(lambda: tmp_path, clock=lambda: 1.0, with_base=True)
    (run,) = both.running()
    assert (run.label, run.observations, run.planned) == ("t[D0-R0] base", 1, 4)


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [False, True])
def test_every_round_has_its_line(pytester: pytest.Pytester, quiet: bool) -> None:
    """The lines docs/writing-benchmarks.md shows, between pytest's."""
    _repo(pytester, candidate=TESTS.replace("0.002", "0.003"))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out",
                                           "--bench-against=main", "--bench-rounds=2",
                                           *(["-q"] if quiet else []))
    assert result.ret in (0, 6, 9), result.stdout.str()
    lines = [line for line in result.outlines if line.startswith("dlbench: test_fast")]
    if quiet:
        assert lines == []
        return
    assert len(lines) == 2, result.stdout.str()
    number = r"[\d,.]+ items/s"
    assert re.fullmatch(rf"dlbench: test_fast\[D0-R0\] round 1 of 2: base {number}, "
                        rf"candidate {number} in \d+s", lines[0]), lines[0]
    assert re.fullmatch(rf"dlbench: test_fast\[D0-R1\] round 2 of 2: candidate {number}, "
                        rf"base {number} in \d+s", lines[1]), lines[1]
    # The file's name once before them (docs/running.md, the CI log), pytest's result letter
    # on the line after them.
    first = result.outlines.index(lines[0])
    assert result.outlines[first - 1].strip() == "test_dl.py", result.stdout.str()
    assert result.outlines[first + 1] == lines[1]
    after = result.outlines[first + 2]
    assert re.match(r"[.F]\s", after), result.stdout.str()
    # Both sides ran the steps the candidate's marker asked for.
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    for path in (run_dir / "test_fast.D0.R0.data", run_dir / "base" / "test_fast.D0.R0.data"):
        rates = [json.loads(li) for li in path.read_text().splitlines()
                 if '"event": "rate"' in li]
        assert len(rates) == 7, path


@pytest.mark.slow
def test_the_candidates_steps_are_both_sides(pytester: pytest.Pytester) -> None:
    """The base revision's test has no marker: it runs the candidate's 1 + 6 steps, not 5 + 60."""
    _repo(pytester, tests=TESTS.replace("    @pytest.mark.bench_steps(warmup=1, steps=6)\n", ""),
          candidate=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bench-base=out", "-q",
                                           "--bench-against=main", "--bench-rounds=2")
    assert result.ret in (0, 6, 9), result.stdout.str()
    (run_dir,) = (pytester.path / "out" / "runs").iterdir()
    for path in (run_dir / "test_fast.D0.R1.data", run_dir / "base" / "test_fast.D0.R1.data"):
        records = [json.loads(li) for li in path.read_text().splitlines()]
        assert sum(r["event"] == "rate" for r in records) == 7, path
        assert records[0]["spec"]["skip"] == 1 and records[0]["spec"]["stop"] == 6
