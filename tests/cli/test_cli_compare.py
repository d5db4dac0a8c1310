"""``dlbench compare`` and the saved baseline of ``evaluate`` (``dlbench report --compare``,
pytest's ``--bench-compare``) are one mode, ``results/judge/saved.compare_saved``
(docs/architecture.md, "Contracts and their single owner"): both paths call it, and on a
recorded run they give the same comparison's JSON and the same exit status.

The JSON is also held against tests/golden/compare_saved.json, written by the code before the
mode had one home; regenerate after an intended change with ``DLBENCH_UPDATE_GOLDEN=1`` and
review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from _paths import TESTS_DIR
from _runs import steady_at, write_run

from pytest_dlbench.cli import main
from pytest_dlbench.results import gate

GOLDEN = TESTS_DIR / "golden" / "compare_saved.json"
QUIET = (0.001, -0.001, 0.0005, -0.0005, 0.0)


def recorded_run(path: Path, rate: float) -> Path:
    """Five repeats each of two weighted benchmarks, 0.1 % apart: ``resnet`` at ``rate``."""
    for repeat, jitter in enumerate(QUIET):
        write_run(path, "resnet", steady_at(rate * (1 + jitter)), repeat=repeat)
        write_run(path, "bert", steady_at(500 * (1 + jitter)), repeat=repeat)
    return path


def saved(run_dir: Path, out: Path) -> Path:
    assert main(["report", str(run_dir), "-q", "--save", str(out)]) == gate.OK
    return out


def baseline_of(tmp_path: Path, sessions: int) -> Path:
    """The baseline at 100 items/s: one session's saved summary, or several merged."""
    files = [saved(recorded_run(tmp_path / "runs" / f"base{k}.20261128-10000{k}", 100.0),
                   tmp_path / f"session{k}.json") for k in range(sessions)]
    if sessions == 1:
        return files[0]
    merged = tmp_path / "baseline.json"
    assert main(["baseline", str(merged), *map(str, files)]) == gate.OK
    return merged


@pytest.fixture(autouse=True)
def _columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")


@pytest.fixture
def saved_comparisons(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every :func:`compare_saved` call's result, in order, wherever it is called from."""
    from pytest_dlbench.results import evaluation
    from pytest_dlbench.results.judge import saved as compare

    made: list[Any] = []
    real = compare.compare_saved

    def spy(*args: Any, **kwargs: Any) -> Any:
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(compare, "compare_saved", spy)
    monkeypatch.setattr(evaluation, "compare_saved", spy)
    return made


def _rounded(value: Any) -> Any:
    """Floats to 9 significant digits: the golden file holds the verdicts' figures, not the
    last bits of one platform's arithmetic."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


@pytest.mark.parametrize(("sessions", "status"), [(1, gate.EXIT_INCONCLUSIVE),
                                                   (3, gate.EXIT_REGRESSED)])
def test_report_and_compare_judge_through_compare_saved_alike(
    tmp_path: Path, saved_comparisons: list[Any], sessions: int, status: int,
) -> None:
    baseline = baseline_of(tmp_path, sessions)
    slow = recorded_run(tmp_path / "runs" / "slow.20261128-110000", 90.0)
    current = saved(slow, tmp_path / "current.json")
    assert saved_comparisons == []  # a run without a baseline is not compared

    assert main(["report", str(slow), "-q", "--compare", str(baseline)]) == status
    assert main(["compare", str(baseline), str(current), "-q"]) == status

    by_report, by_compare = (made.comparison.to_dict() for made in saved_comparisons)
    # Only the report names the file its baseline came from; everything else is equal.
    assert by_report.pop("baseline_path") == str(baseline)
    assert by_compare.pop("baseline_path") is None
    assert by_report == by_compare

    golden = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    key = f"{sessions} session" + ("s" if sessions > 1 else "")
    if os.environ.get("DLBENCH_UPDATE_GOLDEN"):
        golden[key] = _rounded(by_report)
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    assert _rounded(by_report) == golden[key]


def test_compare_saved_names_the_baseline_and_the_history_files_left_out(
    tmp_path: Path,
) -> None:
    from pytest_dlbench.results.judge import HistoryDrifts, compare_saved, compare_summaries
    from pytest_dlbench.results.model import load_summary

    baseline = load_summary(baseline_of(tmp_path, 1))
    current = load_summary(saved(recorded_run(tmp_path / "runs" / "c.20261128-110000", 90.0),
                                 tmp_path / "current.json"))
    history = HistoryDrifts(folder=tmp_path / "history", left_out=("bad.json: not JSON",))
    made = compare_saved(current, baseline, history=history, baseline_path="b.json")
    assert made.summary is current and made.confirmation is None
    assert made.comparison.baseline_path == "b.json"
    assert made.comparison.warnings[-1].startswith(f"history {tmp_path / 'history'}: bad.json")
    plain = compare_summaries(current, baseline)
    assert made.comparison.benchmarks == plain.benchmarks


def test_compare_saved_takes_the_confirmed_summary_and_comparison(tmp_path: Path) -> None:
    """What ``confirm`` finds (``--bench-confirm``'s runs) replaces the first pass; the
    baseline's file is named on the confirmed comparison."""
    import dataclasses

    from pytest_dlbench.results.judge import compare_saved
    from pytest_dlbench.results.model import load_summary

    baseline = load_summary(baseline_of(tmp_path, 1))
    current = load_summary(saved(recorded_run(tmp_path / "runs" / "c.20261128-110000", 90.0),
                                 tmp_path / "current.json"))
    confirmed_summary = dataclasses.replace(current, run_dir="confirmed")
    seen: list[Any] = []

    def confirm(first: Any, base: Any, comparison: Any, **rule: Any) -> Any:
        seen.append((first, base, rule))
        return confirmed_summary, dataclasses.replace(comparison, warnings=("again",)), "record"

    made = compare_saved(current, baseline, tolerance=0.05, alpha=0.01, confirm=confirm,
                         baseline_path="b.json")
    assert seen == [(current, baseline, {"tolerance": 0.05, "alpha": 0.01, "drifts": {}})]
    assert made.summary is confirmed_summary and made.confirmation == "record"
    assert made.comparison.warnings == ("again",)
    assert made.comparison.baseline_path == "b.json"
