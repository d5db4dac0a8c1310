"""The table's figures say what they are (issue 41 item 4): a time at its significant digits,
one number format per TFLOP/s column, and an MFU of ``-`` with its reason under the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from _runs import steady_at, write_run

from pytest_dlbench.core.numbers import column, time_figure
from pytest_dlbench.report.terminal import render_summary, seconds
from pytest_dlbench.results.figures import summarize_dir
from pytest_dlbench.results.model import SuiteSummary


def test_a_time_keeps_its_significant_digits() -> None:
    assert seconds(0.0112) == "0.0112 s"  # was "0.01 s"
    assert seconds(80.11) == "80.11 s" and seconds(1234.5) == "1,234 s"
    assert time_figure(0.41) == "0.41" and time_figure(None) == "-"


def _flops_summary(tmp_path: Path, tflops: dict[str, float]) -> SuiteSummary:
    run_dir = tmp_path / "s.1"
    run_dir.mkdir()
    for name in tflops:
        write_run(run_dir, name, steady_at(100.0, 6))
    summary = summarize_dir(run_dir)
    benches = tuple(dataclasses.replace(b, tflops=tflops[b.name]) for b in summary.benchmarks)
    return dataclasses.replace(summary, benchmarks=benches)


def _cells(text: str, header: str) -> dict[str, str]:
    """``{bench: cell}`` of the table whose header line has ``header``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if header in line.split())
    at = lines[start].split().index(header)
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()[at]
    return rows


def test_a_tflops_column_has_one_format(tmp_path: Path) -> None:
    text = render_summary(_flops_summary(tmp_path, {"small": 2.18e-05, "big": 0.000816}),
                          width=120)
    # Was "2.18e-05" above "0.000816": decimals both (and the docs' outputs read both as #).
    assert _cells(text, "TFLOP/s") == {"small": "0.0000218", "big": "0.000816"}
    assert column([0.5, 12.0, None]) == ["0.5", "12.0", "-"]  # number()'s
    assert column([3.1e-07, 0.000816]) == ["3.10e-07", "8.16e-04"]  # both scientific


def test_an_mfu_dash_says_why(tmp_path: Path) -> None:
    text = render_summary(_flops_summary(tmp_path, {"a": 0.002, "b": 0.003}), width=120)
    assert _cells(text, "MFU") == {"a": "-", "b": "-"}
    assert ("MFU not shown: a, b (no peak known for cpu (fp32): no datasheet peak "
            "(results/figures/peaks.py) and no matmul benchmark of fp32 in this run to measure one)"
            in text.splitlines())


def test_the_html_page_says_the_same(tmp_path: Path) -> None:
    from pytest_dlbench.report.html import render_html

    html = render_html(_flops_summary(tmp_path, {"small": 2.18e-05, "big": 0.000816}))
    assert "0.0000218" in html and "0.000816" in html and "2.18e-05" not in html
    assert 'title="no peak known for cpu (fp32): no datasheet peak' in html  # the MFU "—"


def test_a_failed_run_shows_the_rate_it_measured(tmp_path: Path) -> None:
    """A run that failed its load check still measured its window: the figure stands beside the
    failure, marked as not scored (perf counts only runs that succeeded), instead of a bare
    ``-`` that reads as if nothing was measured."""
    from pytest_dlbench.report.html import render_html

    run_dir = tmp_path / "s.1"
    run_dir.mkdir()
    write_run(run_dir, "starved", steady_at(1469.7, 6), status="fail",
              reason="ValidationError: GPU load 25% below the 50% threshold (mean of 52 samples)",
              units="img/s")
    write_run(run_dir, "crashed", (), status="crash", reason="crash: killed by SIGSEGV")
    summary = summarize_dir(run_dir)
    lines = render_summary(summary, width=120).splitlines()
    assert ("  failed starved[D0]: fail: ValidationError: GPU load 25% below the 50% threshold "
            "(mean of 52 samples) (it measured 1,470 img/s, not scored)") in lines
    assert "  failed crashed[D0]: crash: killed by SIGSEGV" in lines  # nothing measured
    (starved,) = [b for b in summary.benchmarks if b.name == "starved"]
    assert starved.perf is None  # the figure is shown, never scored
    failures = render_html(summary).split('id="failures-table"')[1].split("</table>")[0]
    assert "<td>1,470</td><td class=\"l\">img/s</td>" in failures
