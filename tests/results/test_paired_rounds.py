"""A paired run's score compares only the rounds both sides completed (issue 40 item 14): a
base round that failed or was cut short, or a candidate round that never ran (a killed xdist
worker), does not skew the adj score ratio of identical code."""

from __future__ import annotations

from pathlib import Path

import pytest
from _runs import steady_at, write_run

from pytest_dlbench import layout
from pytest_dlbench.report.terminal import render_paired
from pytest_dlbench.results.judge import summarize_paired_dir

LOAD = (1.0, 0.8, 1.1, 0.9)  # each round's load, shared by its two runs


def identical_sides(tmp: Path, rounds: int = 4) -> Path:
    """The same code on both sides: every pair's ratio 1.000, the rounds' rates apart."""
    run = tmp / "run"
    layout.base_dir(run).mkdir(parents=True)
    for r in range(rounds):
        for folder in (layout.base_dir(run), run):
            write_run(folder, "x", steady_at(100.0 * LOAD[r % len(LOAD)]), repeat=r)
    layout.write_against(run, {"rev": "main", "sha": "a" * 40, "rounds": rounds,
                               "order": "ABBA", "test": "t", "warnings": []})
    return run


def _broken(run: Path, how: str) -> None:
    if how == "base round crashed":
        write_run(layout.base_dir(run), "x", repeat=2, status="crash", reason="crash: boom")
    elif how == "base round cut short":  # Ctrl-C: no end record
        write_run(layout.base_dir(run), "x", steady_at(50.0), repeat=3, status=None)
    else:  # a killed worker: the candidate's last round never ran
        (run / "x.D0.R3.data").unlink()


@pytest.mark.parametrize("how", ["base round crashed", "base round cut short",
                                 "candidate round missing"])
def test_the_score_compares_the_rounds_both_sides_completed(tmp_path: Path, how: str) -> None:
    run = identical_sides(tmp_path)
    _broken(run, how)
    result = summarize_paired_dir(run)
    assert result is not None
    _, base, comparison = result
    x = comparison.get("x")
    assert x is not None and x.samples == (3, 3)
    assert x.ratio == pytest.approx(1.0) and x.verdict == "unchanged"
    assert x.adj_ratio == pytest.approx(1.0)  # 1.333 (crash), 2.000 (Ctrl-C) before
    assert x.current_adj == pytest.approx(x.baseline_adj)
    assert comparison.score_ratio == pytest.approx(1.0)
    assert "adj score ratio 1.000" in render_paired(comparison, base, width=120)


def test_every_round_completed_keeps_each_sides_perf_adj(tmp_path: Path) -> None:
    result = summarize_paired_dir(identical_sides(tmp_path))
    assert result is not None
    cand, base, comparison = result
    x = comparison.get("x")
    assert x is not None
    assert (x.current_adj, x.baseline_adj) == (cand.get("x").perf_adj,  # type: ignore[union-attr]
                                               base.get("x").perf_adj)  # type: ignore[union-attr]
