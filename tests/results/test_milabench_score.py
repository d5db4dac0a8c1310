"""--bench-score=milabench: milabench's score beside the seed's (milarun's perf_adj), both
recomputed on a recorded run by implementations written here.

milabench's, from its source at commit faf39234e7ff35b45a49faa09c66383519f6ec55
(github.com/mila-iqia/milabench):

- ``milabench/summary.py`` ``_metrics`` (lines 213-228): the values sorted, the lowest and the
  highest dropped when there are 5 or more (line 216-217), ``np.mean`` of the rest;
- ``milabench/summary.py`` ``aggregate`` (lines 130-131) and ``_summarize`` (lines 292-294,
  317-326): each run's rates keyed by its device, pooled over the runs of one benchmark name;
  ``n`` the runs, ``failures`` those that did not succeed;
- ``milabench/report/__init__.py`` ``_make_row`` (lines 69-80): the sum over devices of their
  ``_metrics`` mean, times ``1 - fail / max(n, 1)``;
- ``milabench/report/__init__.py`` ``make_dataframe`` (lines 234-249) and ``make_report``'s
  ``_score`` (lines 453-474): a weighted benchmark with no run gets an empty row (score NaN,
  then 0 by ``fillna(0)``); ``exp(Σ log(score + 1)·w / Σ w)`` with ``w = weight × enabled``.

The project's data differ from milabench's in one way the test follows: a device's rates are
its successful runs' steady steps (milabench pools every rate voir reported).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _runs import write_manifest, write_run

from pytest_dlbench.results.evaluation import EvaluateOptions, evaluate
from pytest_dlbench.results.figures import (
    MILABENCH,
    bench_figure,
    suite_score,
    summarize_dir,
    trimmed_mean,
)
from pytest_dlbench.results.model import SuiteSummary


def _steps(*rates: float) -> list[tuple[float, float]]:
    """One second per step at each rate: (items, seconds)."""
    return [(r, 1.0) for r in rates]


def _record(run_dir: Path) -> Path:
    """A recorded run: a benchmark on two devices (one of them run twice), one with a crashed
    run, one weighted and never run, one disabled, one of weight 0, and one weighted benchmark of
    the suite not selected."""
    run_dir.mkdir()
    write_manifest(run_dir, {
        "resnet": {"weight": 2.0},
        "bert": {"weight": 1.0},
        "absent": {"weight": 3.0},
        "off": {"weight": 5.0, "enabled": False},
        "free": {"weight": 0.0},
    })
    write_run(run_dir, "resnet", _steps(100, 104, 90, 130, 101, 99, 103), device=0, repeat=0,
              weight=2.0)
    write_run(run_dir, "resnet", _steps(98, 102, 60), device=0, repeat=1, weight=2.0)
    write_run(run_dir, "resnet", _steps(80, 82, 84, 86), device=1, weight=2.0)
    write_run(run_dir, "bert", _steps(10, 11, 12, 13, 14, 15, 40, 1), device=0, weight=1.0)
    write_run(run_dir, "bert", _steps(9, 10, 11, 12, 13, 14), device=1, weight=1.0)
    write_run(run_dir, "bert", (), device=2, weight=1.0, status="crash", reason="segfault")
    write_run(run_dir, "off", _steps(1000, 1000, 1000, 1000, 1000), weight=5.0, enabled=False)
    write_run(run_dir, "free", _steps(7, 7, 7, 7, 7), weight=0.0)
    # The suite's weighted benchmarks, selected or not (plugin/controller.py writes them): this
    # run is a subset that left "unselected" out.
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["suite_weighted"] = ["resnet", "bert", "absent", "unselected"]
    manifest["suite_weights"] = {"resnet": 2.0, "bert": 1.0, "absent": 3.0, "unselected": 4.0}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def _runs(run_dir: Path) -> list[dict[str, Any]]:
    """Each stream as milabench's ``aggregate`` holds a run: its name, whether it succeeded, its
    rates keyed by device; the steady items and seconds too, for the seed's score."""
    out = []
    for path in sorted(run_dir.glob("*.data")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line]
        config = next(r for r in records if r["event"] == "config")
        end = [r for r in records if r["event"] == "end"][-1]
        steady = [r for r in records if r["event"] == "rate" and not r["warmup"]]
        out.append({"name": config["spec"]["name"], "device": config["device"],
                    "success": end["status"] == "ok" and bool(steady),
                    "train_rate": [r["value"] for r in steady],
                    "items": [r["items"] for r in steady],
                    "seconds": [r["seconds"] for r in steady]})
    return out


def _milabench_metrics_mean(xs: list[float]) -> float:
    """milabench/summary.py ``_metrics`` (lines 213-228), its mean."""
    xs = sorted(x for x in xs if x is not None)
    if len(xs) >= 5:
        xs = xs[1:-1]
    return float(np.mean(xs)) if xs else math.nan


def _milabench_scores(run_dir: Path, weights: dict[str, tuple[float, bool]]
                      ) -> tuple[dict[str, float], float]:
    """Each benchmark's ``score`` column and the suite's Score, as milabench's report makes
    them (module docstring)."""
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in _runs(run_dir):
        by_name[run["name"]].append(run)
    rows: dict[str, float] = {}
    for name in weights:
        runs = by_name.get(name)
        if not runs:  # make_dataframe's empty row: score NaN
            rows[name] = math.nan
            continue
        per_gpu: dict[int, list[float]] = defaultdict(list)
        for run in runs:
            if run["success"]:  # the project's data: successful runs' steady steps
                per_gpu[run["device"]].extend(run["train_rate"])
        n = len(runs)
        fail = sum(not r["success"] for r in runs)
        acc = sum(_milabench_metrics_mean(v) for v in per_gpu.values())
        rows[name] = acc * (1 - fail / max(n, 1))
    score = np.nan_to_num(np.array([rows[k] for k in weights], dtype=float), nan=0.0)
    w = np.array([wt * int(enabled) for wt, enabled in weights.values()], dtype=float)
    return rows, float(np.exp(np.sum(np.log(score + 1) * w) / np.sum(w)))


def _seed_score(run_dir: Path, weights: dict[str, tuple[float, bool]]) -> float:
    """The seed's score (milarun's): perf = the mean of the successful runs' Σitems/Σseconds,
    std% their population std over perf (capped at 50 %), perf_adj = perf × (1 − std%) ×
    (1 − fail/n), the weighted geometric mean of the positive perf_adj of the enabled,
    weighted benchmarks (each scored one here has two successful runs or more)."""
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in _runs(run_dir):
        by_name[run["name"]].append(run)
    pairs = []
    for name, (weight, enabled) in weights.items():
        runs = by_name.get(name, [])
        ok = [sum(r["items"]) / sum(r["seconds"]) for r in runs if r["success"]]
        if not enabled or weight <= 0 or len(ok) < 2:
            continue
        perf = sum(ok) / len(ok)
        std = math.sqrt(sum((x - perf) ** 2 for x in ok) / len(ok))
        fail = sum(not r["success"] for r in runs)
        pairs.append((perf * (1 - min(std / perf, 0.5)) * (1 - fail / len(runs)), weight))
    return math.exp(sum(w * math.log(x) for x, w in pairs) / sum(w for _, w in pairs))


# The whole suite's configuration, as milabench reads its weights (milabench/config/__init__.py
# lines 22-23 and 199-200: the configuration before --select; cli/run.py line 136).
WEIGHTS = {"resnet": (2.0, True), "bert": (1.0, True), "absent": (3.0, True),
           "off": (5.0, False), "free": (0.0, True), "unselected": (4.0, True)}


def test_both_scores_match_implementations_written_from_their_definitions(tmp_path: Path
                                                                          ) -> None:
    run = _record(tmp_path / "run")
    evaluation = evaluate(run, EvaluateOptions(score=MILABENCH))
    summary = evaluation.summary
    rows, expected = _milabench_scores(run, WEIGHTS)
    assert summary.milabench is not None
    assert summary.milabench.score == pytest.approx(expected, rel=1e-12)
    assert summary.milabench.left_out == {"unselected": 4.0}
    for name, row in rows.items():
        if name == "unselected":
            continue
        figure = summary.milabench.benchmarks.get(name)
        if math.isnan(row):
            assert figure is None, name
        else:
            assert figure == pytest.approx(row, rel=1e-12), name
    # The seed's score is unchanged by the option, and is not milabench's.
    assert summary.score == pytest.approx(_seed_score(run, WEIGHTS), rel=1e-12)
    assert summary.score == summarize_dir(run).score
    assert summary.score != pytest.approx(summary.milabench.score, rel=0.01)


def test_the_figures_by_hand(tmp_path: Path) -> None:
    """The same run's figures, worked out once by hand."""
    summary = evaluate(_record(tmp_path / "run"), EvaluateOptions(score=MILABENCH)).summary
    # resnet D0 pools 10 steps (7 + 3): sorted, min 60 and max 130 dropped, the 8 left averaged;
    # D1 has 4 steps: none dropped.
    d0 = (90 + 98 + 99 + 100 + 101 + 102 + 103 + 104) / 8
    d1 = (80 + 82 + 84 + 86) / 4
    resnet = bench_figure(_bench(summary, "resnet"))
    assert resnet == pytest.approx(d0 + d1)
    # bert: D0 drops 1 and 40, D1 drops 9 and 14; 1 of its 3 runs failed.
    bert = (12.5 + 11.5) * (1 - 1 / 3)
    assert bench_figure(_bench(summary, "bert")) == pytest.approx(bert)
    # absent never ran (0, weight 3), unselected was not selected (0, weight 4); off is
    # disabled; free weighs 0.
    expected = math.exp((2 * math.log(resnet + 1) + math.log(bert + 1) + 7 * math.log(1)) / 10)
    assert summary.milabench is not None
    assert summary.milabench.score == pytest.approx(expected)


def _bench(summary: SuiteSummary, name: str) -> Any:
    bench = summary.get(name)
    assert bench is not None
    return bench


def test_trimmed_mean_drops_the_extremes_from_five_values_on() -> None:
    assert trimmed_mean([1, 2, 100, 3]) == pytest.approx(26.5)  # 4 values: all kept
    assert trimmed_mean([1, 2, 100, 3, 4]) == pytest.approx(3.0)  # 5: 1 and 100 dropped
    assert trimmed_mean([]) is None


def test_the_suite_score_counts_a_missing_figure_as_zero_and_nothing_weighing_as_none() -> None:
    # exp(mean(log(0 + 1), log(3 + 1))) = 2: the 1 added is never taken off again.
    assert suite_score([(None, 1.0, True), (3.0, 1.0, True)]) == pytest.approx(2.0)
    assert suite_score([(3.0, 1.0, True), (99.0, 1.0, False)]) == pytest.approx(4.0)
    assert suite_score([(3.0, 0.0, True)]) is None


def test_the_default_computes_no_milabench_score(tmp_path: Path) -> None:
    summary = evaluate(_record(tmp_path / "run")).summary
    assert summary.milabench is None
    assert "milabench_score" not in summary.to_dict()


def test_terminal_json_html_and_cli_name_milabench_score(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    from pytest_dlbench.cli import main
    from pytest_dlbench.report.html import render_html
    from pytest_dlbench.report.terminal import render_summary

    run = _record(tmp_path / "run")
    summary = evaluate(run, EvaluateOptions(score=MILABENCH)).summary
    assert summary.milabench is not None
    text = render_summary(summary)
    line = next(x for x in text.splitlines() if x.startswith("milabench score: "))
    assert "counted as 0: absent; 1 weighted benchmark of the suite not selected" in line
    quiet = render_summary(summary, verbosity=-1).splitlines()
    assert quiet[0].startswith("score") and quiet[0].endswith("; incomplete: absent")
    assert len(quiet) == 2 and quiet[1].startswith("milabench score: ")
    saved = summary.to_dict()
    assert saved["milabench_score"]["score"] == summary.milabench.score
    assert saved["score"] == summary.score  # the seed's key keeps the seed's score
    again = SuiteSummary.from_dict(json.loads(json.dumps(saved, allow_nan=False)))
    assert again.milabench == summary.milabench
    html = render_html(summary)
    assert 'id="milabench-score-value"' in html and "milarun's <code>perf_adj</code>" in html

    out = tmp_path / "s.json"
    assert main(["report", str(run), "--score", "milabench", "--save", str(out)]) in (0, 1)
    assert "milabench score: " in capsys.readouterr().out
    assert json.loads(out.read_text())["milabench_score"]["benchmarks"]["absent"] is None
