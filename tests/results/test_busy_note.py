"""A plain run says when its figures measure the machine's load (issue 41 item 7): a benchmark
whose runs the monitor found busy (results/figures/busy.py, the check the gate's doubts read) gets a
line under the table and a badge in the HTML report; docs/running.md shows the line."""

from __future__ import annotations

from typing import Any

from _paths import REPO_ROOT

from pytest_dlbench.report.html import render_html
from pytest_dlbench.report.terminal import busy_lines, render_summary
from pytest_dlbench.results.figures import machine_busy
from pytest_dlbench.results.model import SCHEMA, SuiteSummary

DOCS = REPO_ROOT / "docs" / "running.md"


def _summary(busy: list[bool]) -> SuiteSummary:
    # The reason as the monitor's samples give it: a neighbour at ~1.6 cores all along.
    verdict = machine_busy([1.5, 1.6, 1.7, 1.6], whole_machine=True)
    assert verdict is not None and verdict.busy
    runs = [{"rate": 2000.0, "status": "ok", "repeat": i, "device": 0,
             "telemetry": {"busy": b, "busy_reason": verdict.reason if b else None}}
            for i, b in enumerate(busy)]
    data: dict[str, Any] = {"schema": SCHEMA, "version": 1, "suite": "smoke", "benchmarks": {
        "toy": {"n": len(runs), "fail": 0, "perf": 2000.0, "perf_adj": 1900.0, "weight": 1.0,
                "units": "items/s", "runs": runs},
        "matmul": {"n": 1, "fail": 0, "perf": 0.1, "perf_adj": 0.1, "weight": 1.0,
                   "units": "TFLOP/s", "runs": [{"rate": 0.1, "status": "ok", "device": 0,
                                                 "telemetry": {"busy": False}}]}}}
    return SuiteSummary.from_dict(data)


def test_a_busy_benchmark_is_said_under_the_table_and_a_quiet_one_is_not() -> None:
    text = render_summary(_summary([True, True]), width=100)
    lines = [line for line in text.splitlines() if "busy" in line]
    assert lines[0].startswith("busy: toy (2 of 2 runs while other processes used 1.60 cores")
    assert "its figures measure this machine's load as well as the code" in lines[0]
    assert not any("matmul" in line for line in lines)
    assert busy_lines(_summary([False, False])) == []  # a quiet run says nothing


def test_the_html_report_marks_a_busy_benchmark() -> None:
    page = render_html(_summary([False, True]))
    assert "busy machine</span>" in page and "1 of 2 runs while other processes" in page
    assert "busy machine</span>" not in render_html(_summary([False, False]))


def test_the_docs_show_the_line_the_table_prints() -> None:
    text = DOCS.read_text()
    block = text.split("## Stable figures on a CPU", 1)[1].split("```text\n", 1)[1]
    block = block.split("```", 1)[0].splitlines()
    assert block == busy_lines(_summary([True, True]))
