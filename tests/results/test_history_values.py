"""A history file's figures are data someone else wrote (issue 40 item 6): a perf or a run rate
that is not a finite positive number (``1e999``, ``Infinity``, ``NaN``, 0, negative) is left
out with one warning line naming the file; the series, its steps, the drift and the reports
go on with the rest."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _history_files import RATES, history_of, spoil

from pytest_dlbench.report.history import history_section
from pytest_dlbench.results.history import bench_series, load_history, report_series
from pytest_dlbench.results.judge import history_drifts

#: What a hostile or broken file may hold instead of benchmark b's perf 99.0 (commit 2).
BAD = ["1e999", "-1e999", "Infinity", "NaN", "0", "-5.0", "9" * 401]


@pytest.mark.parametrize("perf", BAD)
def test_the_reader_leaves_out_a_figure_that_is_not_a_finite_positive_rate(
        tmp_path: Path, perf: str) -> None:
    folder = history_of(tmp_path, [float(r) for r in RATES])
    bad = spoil(folder, 2, perf, rate=perf)
    entries, problems = load_history(folder)
    assert len(entries) == 10  # the file is read: its other figures count
    assert problems == [f"left out: {bad}: b (perf {float(perf)!r}, 1 run rate): not finite "
                        "positive rates (the file's other figures are read)"]
    (spoilt,) = [e for e in entries if e.path == bad]
    b, other = spoilt.summary.get("b"), spoilt.summary.get("other")
    assert b is not None and b.perf is None and b.rates == ()
    assert other is not None and other.perf == pytest.approx(50.0)  # untouched
    series = {s.bench: s for s in bench_series(entries)}
    assert len(series["b"].points) == 9 and len(series["other"].points) == 10
    (step,) = series["b"].steps  # the step is still found, at its commit
    assert series["b"].points[step.index].commit == entries[5].commit
    assert series["b"].notes == (problems[0],) and series["other"].notes == ()


def test_a_rate_alone_is_left_out_and_the_drift_reads_the_rest(tmp_path: Path) -> None:
    folder = history_of(tmp_path, [float(r) for r in RATES])
    bad = spoil(folder, 1, "101.0", rate="1e999")
    entries, problems = load_history(folder)
    assert problems == [f"left out: {bad}: b (1 run rate): not finite positive rates (the "
                        "file's other figures are read)"]
    assert all(math.isfinite(r) for e in entries for bench in e.summary.benchmarks
               for r in bench.rates)
    history_drifts(entries)  # no error: the drift reads finite rates only


def test_step_detection_never_sees_a_figure_it_cannot_use(tmp_path: Path) -> None:
    """An entry made in memory (not through the reader) with an infinite or NaN perf: the
    series leaves that point out instead of raising."""
    entries, _ = load_history(history_of(tmp_path, [float(r) for r in RATES]))
    for value in (math.inf, math.nan, 0.0, -1.0):
        spoilt = list(entries)
        summary = spoilt[2].summary
        benches = tuple(dataclasses.replace(b, perf=value) if b.name == "b" else b
                        for b in summary.benchmarks)
        spoilt[2] = dataclasses.replace(spoilt[2],
                                        summary=dataclasses.replace(summary, benchmarks=benches))
        (series,) = bench_series(spoilt, select=lambda name: name == "b")
        assert len(series.points) == 9 and [s.index for s in series.steps] == [4]


def test_the_html_history_shows_the_series_and_names_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from _history_files import run_summary

    monkeypatch.setenv("DLBENCH_MACHINE", "box")
    folder = history_of(tmp_path, [float(r) for r in RATES])
    monkeypatch.setenv("DLBENCH_MACHINE", next(folder.iterdir()).name)
    bad = spoil(folder, 2, "1e999")
    where, series = report_series(run_summary(tmp_path, "now", {"b": 85.0}), folder)
    assert where == folder and [len(s.points) for s in series] == [9]
    section = history_section(series, folder)
    assert f"warning: left out: {bad}: b (perf inf)" in section
    assert section.count('class="step"') == 1


def test_dlbench_history_warns_and_exits_0(tmp_path: Path) -> None:
    """The command, in its own process: a history with an infinite perf was a traceback."""
    folder = history_of(tmp_path, [float(r) for r in RATES])
    bad = spoil(folder, 2, "1e999")
    env: dict[str, Any] = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "pytest_dlbench.cli", "history", "--history",
                           str(folder)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""
    assert (f"warning: left out: {bad}: b (perf inf): not finite positive rates (the file's "
            "other figures are read)\n") in done.stdout
    assert "b  [" in done.stdout and "9 commits" in done.stdout and "step at" in done.stdout
