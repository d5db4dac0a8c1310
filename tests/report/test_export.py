"""github-action-benchmark export (customBiggerIsBetter)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _runs import steady_at, write_manifest, write_run

from pytest_dlbench.report.export import benchmark_action_entries, export_benchmark_action
from pytest_dlbench.results.figures import summarize_dir


def test_entries(tmp_path: Path) -> None:
    write_run(tmp_path, "resnet", steady_at(100.0), repeat=0)
    write_run(tmp_path, "resnet", steady_at(110.0), repeat=1)
    write_run(tmp_path, "dead", status="crash", reason="crash: x")
    write_manifest(tmp_path, {"resnet": {}, "dead": {}, "never": {}})
    summary = summarize_dir(tmp_path)
    path = export_benchmark_action(summary, tmp_path / "out" / "bench.json")
    data = json.loads(path.read_text())
    assert data == benchmark_action_entries(summary)
    assert [e["name"] for e in data] == ["resnet", "dead", "never", "score"]
    for entry in data:
        assert isinstance(entry["value"], float)
        assert set(entry) <= {"name", "unit", "value", "range", "extra"}
    resnet = data[0]
    assert resnet["unit"] == "items/s"
    assert resnet["value"] == pytest.approx(105.0)  # perf, not perf_adj
    assert resnet["range"] == "± 5.00"
    assert "perf_adj: 100" in resnet["extra"]  # 105 * (1 - 5/105)
    assert data[1]["value"] == 0.0 and "no successful run" in data[1]["extra"]
    assert data[2]["value"] == 0.0 and "not run" in data[2]["extra"]
    score = data[3]
    assert score["unit"] == "score" and score["value"] == pytest.approx(summary.score)
    assert "incomplete: dead, never" in score["extra"]
