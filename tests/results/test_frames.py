"""pytest_dlbench.results.frame (results/history/frames.py): tidy DataFrames from a run directory, a
saved summary and a history; docs/history.md's session run as written; dlbench table --csv
from the same frames, cell for cell the sweep table's CSV."""

from __future__ import annotations

import datetime as dt
import doctest
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _paths import REPO_ROOT
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench.cli import main
from pytest_dlbench.core.errors import DlbenchError
from pytest_dlbench.report.terminal import render_summary
from pytest_dlbench.results import frame
from pytest_dlbench.results.figures import summarize_dir, sweep_csv, sweep_rows
from pytest_dlbench.results.history import GitInfo, autosave, frame_csv, sweep_frame
from pytest_dlbench.results.model import save_summary, summary_dict

DOC = REPO_ROOT / "docs" / "history.md"


def two_benches(run_dir: Path, slow: float = 50.0) -> Path:
    run_dir.mkdir(parents=True)
    write_run(run_dir, "fast", steady_at(200.0, 8))
    write_run(run_dir, "slow", steady_at(slow, 8))
    return run_dir


def a_history(tmp_path: Path) -> Path:
    folder = tmp_path / "history"
    for i, slow in enumerate([50.0, 45.0, 45.0]):
        summary = summarize_dir(two_benches(tmp_path / "runs" / f"h.{i}", slow))
        git = GitInfo(commit=f"{i}" * 40, date=f"2026-01-0{i + 1}T00:00:00+00:00", branch="main")
        autosave(summary_dict(summary, suite="s"), folder, git=git,
                 now=dt.datetime(2026, 2, 1, 0, 0, i, tzinfo=dt.timezone.utc))
    return folder


def test_the_pages_session_runs_as_written(tmp_path: Path) -> None:
    text = DOC.read_text()
    (block,) = re.findall(r"```python\n(>>> .*?)```", text, flags=re.S)
    runs = two_benches(tmp_path / "runs" / "s.1")
    test = doctest.DocTestParser().get_doctest(
        block, {"runs": runs, "history": a_history(tmp_path)}, "docs/history.md", str(DOC), 0)
    result = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE).run(test)
    assert result.attempted >= 7 and result.failed == 0


def test_one_row_per_run_with_the_table_figures(tmp_path: Path) -> None:
    run_dir = tmp_path / "s.1"
    run_dir.mkdir()
    for device in (0, 1):
        write_run(run_dir, "a", steady_at(100.0 + device, 6), device=device)
    write_run(run_dir, "b", steady_at(7.5, 6), status="error", reason="boom")
    summary = summarize_dir(run_dir)
    df = frame(run_dir)
    assert len(df) == 3 and list(df["bench"]) == ["a", "a", "b"]
    assert list(df["device"]) == [0, 1, 0] and str(df["device"].dtype) == "Int64"
    assert df.loc[2, "status"] == "fail" and df.loc[2, "reason"] == "boom"
    assert not df.loc[2, "ok"] and df["ok"].tolist() == [True, True, False]
    # The frame round-trips what the terminal table shows: each benchmark's row has the
    # frame's perf and perf_adj at the table's precision.
    from pytest_dlbench.core.numbers import number

    table = render_summary(summary, None, width=120).splitlines()
    for name, rows in df.groupby("bench"):
        (line,) = [t for t in table if t.split()[:1] == [name]]
        perf = rows["perf"].iloc[0]
        cells = line.split()
        assert cells[1] == ("-" if pd.isna(perf) else number(float(perf)))
        assert number(float(rows["perf_adj"].iloc[0])) in cells
        assert rows["perf"].nunique(dropna=False) == 1  # the benchmark's figure on each run
    assert df["perf"].iloc[0] == summary.benchmarks[0].perf  # full precision, not the table's


def test_a_saved_summary_and_observations(tmp_path: Path) -> None:
    run_dir = two_benches(tmp_path / "s.1")
    saved = save_summary(summarize_dir(run_dir), tmp_path / "b.json", suite="mine")
    df = frame(saved)
    assert sorted(df["bench"]) == ["fast", "slow"] and set(df["suite"]) == {"mine"}
    assert "commit" not in df.columns  # a plain summary, not a history file
    obs = frame(run_dir, observations=True)
    assert len(obs) == 2 * (2 + 8) and obs["warmup"].sum() == 4
    with pytest.raises(DlbenchError, match="not its observations"):
        frame(saved, observations=True)


def test_a_history_folder_and_file(tmp_path: Path) -> None:
    folder = a_history(tmp_path)
    df = frame(folder)
    assert len(df) == 6 and set(df["branch"]) == {"main"}
    assert sorted(set(df["commit"])) == ["0" * 40, "1" * 40, "2" * 40]
    one = frame(next(folder.glob("*/*.json")))
    assert len(one) == 2 and one["machine"].notna().all()
    with pytest.raises(DlbenchError, match="no such folder|observations"):
        frame(folder, observations=True)


def test_matrix_columns_and_mixed_kinds_keep_their_values(tmp_path: Path) -> None:
    rows = [{"bench": "a", "matrix.batch": 1024, "x": 0.5}, {"bench": "b", "matrix.batch": 0.5,
                                                              "x": None}]
    from pytest_dlbench.results.history.frames import _typed

    df = _typed(rows)
    assert df["matrix.batch"].tolist() == [1024, 0.5] and isinstance(df["matrix.batch"][0], int)
    assert df["x"].dtype == float


def test_dlbench_table_csv_is_the_sweep_csv(tmp_path: Path, capsys: Any) -> None:
    run_dir = tmp_path / "s.1"
    run_dir.mkdir()
    write_run(run_dir, "=bad", steady_at(3.0, 6))
    write_run(run_dir, "b", steady_at(1024.0, 6), device=1)
    write_manifest(run_dir, {"=bad": {"matrix": {"batch": 1024}}, "b": {"matrix": {"batch": 0.5}},
                             "never": {"matrix": {"batch": -3}}})
    rows = sweep_rows(summarize_dir(run_dir))
    assert frame_csv(sweep_frame(rows)) == sweep_csv(rows)
    assert main(["table", str(run_dir), "--csv"]) == 0
    out = capsys.readouterr().out
    assert out == sweep_csv(rows) and "'=bad" in out
