"""One unit per figure everywhere (issue 41 item 3): a figure that an output names is in the
unit its name says (core/numbers.FIGURE_UNITS): ``std_pct`` in percent in the frame, MLflow's
and W&B's metrics and the terminal's ``std%``; the saved JSON keeps the fraction it has always
held (STORED_UNITS), so that older files read as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runs import write_run

from pytest_dlbench.core.numbers import FIGURE_UNITS, STORED_UNITS, as_named
from pytest_dlbench.loggers.source import as_shown, bench_metrics, session_metrics
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results import frame
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.model import save_summary


def test_the_same_runs_std_agrees_in_every_output(tmp_path: Path) -> None:
    run_dir = tmp_path / "s.1"
    run_dir.mkdir()
    # Two runs of one benchmark far apart: a std% of about 54 %.
    write_run(run_dir, "noisy", ((10, 1.0),) * 8, repeat=0)
    write_run(run_dir, "noisy", ((10, 0.30),) * 8, repeat=1)
    summary = summarize_dir(run_dir)
    saved = json.loads(save_summary(summary, tmp_path / "b.json").read_text())
    fraction = saved["benchmarks"]["noisy"]["std_pct"]
    assert 0.3 < fraction < 0.7  # the saved JSON: a fraction, as in every older file

    percent = 100 * fraction  # what the name says, everywhere else
    df = frame(run_dir)
    assert list(df["std_pct"]) == pytest.approx([percent, percent])  # on each of its runs
    assert frame(tmp_path / "b.json")["std_pct"].iloc[0] == pytest.approx(percent)
    assert bench_metrics(saved)["noisy"]["std_pct"] == pytest.approx(percent)  # MLflow, W&B
    assert session_metrics(saved)["std_pct/noisy"] == pytest.approx(percent)
    assert as_shown("std_pct", fraction) == pytest.approx(percent)  # W&B's benchmarks table
    (row,) = [line for line in render_summary(summary, width=120).splitlines()
              if line.startswith("noisy")]
    assert f"{percent:.1f}%" in row.split()  # the terminal's std%


def test_the_table_of_units_holds_every_named_percentage() -> None:
    assert FIGURE_UNITS["std_pct"] == "percent" and STORED_UNITS["std_pct"] == "fraction"
    assert set(STORED_UNITS) == set(FIGURE_UNITS)
    assert as_named("std_pct", 0.25) == 25.0
    assert as_named("done_percent", 40.0) == 40.0  # stored as its name says: unchanged
    assert as_named("failure_rate", 0.2) == 0.2
    assert as_named("perf", 0.25) == 0.25 and as_named("std_pct", None) is None
    assert as_named("std_pct", True) is True  # a bool is no number
