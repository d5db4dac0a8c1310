"""Figures too large for the statistics (finite rates near 1e308, JSON integers of hundreds of
digits, absurd sizes handed to the Bench): each costs its own figure or run with one line, never
a traceback, an INTERNALERROR or the rest of the session's reports."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from _runs import write_manifest, write_run

from pytest_dlbench.cli import main as dlbench
from pytest_dlbench.core.protocol import Status
from pytest_dlbench.results.scoring import load_run, summarize_dir

RUN_FAILS = "the run fails, the rest is reported"
TOO_LARGE = "is beyond what the statistics take (at most 1e+100 in magnitude)"

#: (input, what happens, message) rows of docs/running.md's "Bad input" table.
FIGURE_CASES: list[tuple[str, str, str]] = [
    ("`bench.log_rate(1e308)`: a finite rate beyond 1e100", RUN_FAILS,
     f"step 2's rate 1e+308 items/s {TOO_LARGE}"),
    ("a step timed at 1e-306 s (its rate 6.4e307)", RUN_FAILS,
     f"step 2's rate 6.4e+307 items/s {TOO_LARGE}"),
]


def _huge_run(tmp: Path, case: str) -> Path:
    run = tmp / "run"
    run.mkdir()
    if case.startswith("`bench.log_rate"):
        write_run(run, "big", [1e308] * 10, log_rate=True)
    else:
        write_run(run, "big", [(64, 1e-306)] + [(64, 1.0)] * 9)
    write_run(run, "ok", [(10, 1.0)] * 10)
    write_manifest(run, {"big": {}, "ok": {}})
    return run


@pytest.mark.parametrize("case", FIGURE_CASES[:2], ids=lambda c: c[0])
def test_a_rate_too_large_for_the_statistics_fails_its_run_only(
        case: tuple[str, str, str], tmp_path: Path, capsys: Any) -> None:
    """math.fsum overflowed on such rates: INTERNALERROR, no table. The run fails with its
    figure named; the other benchmark, the score, the reports and the sweep table go on."""
    run = _huge_run(tmp_path, case[0])
    big = load_run(next(run.glob("big.*.data")))
    assert big.status is Status.FAIL and big.reason == case[2]
    summary = summarize_dir(run)
    assert summary.score == pytest.approx(10.0)
    assert dlbench(["report", str(run), "--html", str(tmp_path / "r.html")]) == 1
    out, err = capsys.readouterr()
    assert f"failed big[D0]: fail: {case[2]}" in out and "ok " in out
    assert "Traceback" not in out + err
    assert (tmp_path / "r.html").is_file()
    assert dlbench(["table", str(run)]) == 0
    out, err = capsys.readouterr()
    assert "failed 1/1" in out and "Traceback" not in out + err


def test_a_warm_up_step_too_large_fails_the_run_too(tmp_path: Path) -> None:
    """A warm-up step counts in the steps' mean (throughput_avg), which the sweep table shows."""
    run = tmp_path / "run"
    run.mkdir()
    path = write_run(run, "big", [(10, 1.0)] * 10, warmup=[(64, 1e-306)] * 2)
    big = load_run(path)
    assert big.status is Status.FAIL and big.reason.startswith("step 0's rate 6.4e+307")


@pytest.mark.slow
def test_a_session_with_a_huge_rate_reports_everything_else(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(defs=textwrap.dedent("""
        def huge(bench):
            for _ in range(8):
                bench.log_rate(1e308)

        def good(bench):
            for _ in range(8):
                bench.log_rate(10.0)
    """))
    pytester.makefile(".yaml", suite=textwrap.dedent("""
        _base: {voir: {options: {skip: 2, stop: 6}}, max_duration: 60}
        huge: {inherits: _base, definition: defs.py:huge}
        good: {inherits: _base, definition: defs.py:good}
    """))
    result = pytester.runpytest("--bench-suite=suite.yaml", "--bench-base=out", "-rf")
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    result.assert_outcomes(passed=1, failed=1)
    assert f"step 0's rate 1e+308 items/s {TOO_LARGE}" in text
    assert "score:" in text
