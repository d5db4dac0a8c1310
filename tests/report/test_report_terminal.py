"""The terminal report against golden files (fixed width, no terminal probing).

Regenerate after an intended change with ``DLBENCH_UPDATE_GOLDEN=1 pytest tests/...`` and
review the diff of tests/golden/.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from _paths import TESTS_DIR
from _runs import quiet_sessions

from pytest_dlbench.core.numbers import number, significant
from pytest_dlbench.report.terminal import render_comparison, render_summary
from pytest_dlbench.results.figures import run_from_records, summarize_runs
from pytest_dlbench.results.judge import compare
from pytest_dlbench.results.model import SuiteSummary

GOLDEN = TESTS_DIR / "golden"
WIDTH = 100


def _records(name: str, rates: list[float], *, device: int = 0, repeat: int | None = None,
             status: str = "ok", reason: str = "", weight: float = 1.0,
             units: str = "items/s", log_rate: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{
        "event": "config", "device": device, "repeat": repeat,
        "spec": {"name": name, "weight": weight, "units": units, "plan": {"method": "per_gpu"}},
    }]
    for i, rate in enumerate(rates):
        record = {"event": "rate", "value": rate, "warmup": False, "time": float(i)}
        if not log_rate:
            record.update(items=rate, seconds=1.0)
        out.append(record)
    out.append({"event": "end", "status": status, "reason": reason})
    return out


def _suite(scale: float, *, with_old: bool = False) -> SuiteSummary:
    runs = []
    for repeat in (0, 1):
        for device, speed in ((0, 1.0), (1, 1.01), (2, 0.92), (3, 0.99)):  # D2 is slow
            base = 200.0 * scale * speed * (1 + 0.002 * repeat)
            runs.append(_records("resnet50", [base * (1 + 0.001 * (i % 3)) for i in range(10)],
                                 device=device, repeat=repeat, weight=2.0))
    runs.append(_records("bert", [45123.0 + 40 * (i % 5) for i in range(10)],
                         units="tokens/s"))
    runs.append(_records("matmul", [0.1655 / scale + 0.0004 * (i % 2) for i in range(10)],
                         units="TFLOP/s", log_rate=True))
    runs.append(_records("crashy", [12.5, 12.4, 12.6, 12.5, 12.5], repeat=0))
    runs.append(_records("crashy", [12.0], repeat=1, status="crash",
                         reason="crash: killed by SIGSEGV"))
    runs.append(_records("tiny", [3.14159] * 5, weight=0.0))
    if with_old:
        runs.append(_records("old", [1.0] * 5))
    manifest = {"suite": "golden", "benchmarks": {
        "resnet50": {"weight": 2.0}, "bert": {"weight": 1.0}, "matmul": {"weight": 1.0},
        "crashy": {"weight": 1.0}, "missing": {"weight": 1.0}, "tiny": {"weight": 0.0},
    }}
    if with_old:  # the baseline: ran everything it listed, and a benchmark dropped since
        manifest["benchmarks"].pop("missing")
        manifest["benchmarks"]["old"] = {"weight": 1.0}
    return summarize_runs([run_from_records(r) for r in runs], manifest)


@pytest.fixture
def current() -> SuiteSummary:
    return _suite(1.0)


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("DLBENCH_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
    assert text + "\n" == path.read_text(encoding="utf-8")


def test_default(current: SuiteSummary) -> None:
    _golden("report_default.txt", render_summary(current, width=WIDTH))


def test_quiet(current: SuiteSummary) -> None:
    text = render_summary(current, verbosity=-1, width=WIDTH)
    assert "\n" not in text
    _golden("report_quiet.txt", text)


def test_verbose(current: SuiteSummary) -> None:
    text = render_summary(current, verbosity=1, width=WIDTH, price=25000)
    assert "slow devices: D2" in text
    _golden("report_verbose.txt", text)


def test_compare(current: SuiteSummary) -> None:
    # A baseline of quiet sessions (the drift between them at its floor): the 9 % drop regresses.
    comparison = compare(current, quiet_sessions(_suite(1.1, with_old=True)))
    _golden("report_compare.txt", render_summary(current, comparison, width=WIDTH))
    _golden("report_compare_quiet.txt",
            render_summary(current, comparison, verbosity=-1, width=WIDTH))
    _golden("compare.txt", render_comparison(comparison, verbosity=1, width=WIDTH))


def test_a_baseline_from_another_machine_is_one_warning_line(
    current: SuiteSummary, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_dlbench.measure import machine

    def side(gpu: str, torch: str) -> dict[str, Any]:
        return {"machine": {"cpu": "Xeon", "gpus": [{"index": 0, "name": gpu}]},
                "versions": {"torch": torch}}

    monkeypatch.setattr(machine, "current_machine", lambda: side("NVIDIA H100", "2.11.0"))
    baseline = {**_suite(1.1, with_old=True).to_dict(), **side("NVIDIA A100", "2.14.1")}
    comparison = compare(current, baseline)
    line = "warning: baseline machine differs: GPU H100 vs A100, torch 2.11.0 vs 2.14.1"
    assert render_comparison(comparison, width=WIDTH).splitlines()[-1] == line
    report = render_summary(current, comparison, width=WIDTH).splitlines()
    assert report.count(line) == 1
    # The same report as against the same numbers from this machine, plus that one line.
    same = render_summary(current, compare(current, _suite(1.1, with_old=True)), width=WIDTH)
    assert [x for x in report if x != line] == same.splitlines()


def test_parts_of_the_default_report(current: SuiteSummary) -> None:
    text = render_summary(current, width=WIDTH)
    header = text.splitlines()[0].split()
    # Compact (issue 25, item 1): n, fail and total with -v only.
    assert header == ["bench", "perf", "units", "std%", "perf_adj", "weight"]
    assert "incomplete: crashy" not in text  # one run of two succeeded: it is scored
    assert "failed crashy[D0-R1]: crash: killed by SIGSEGV" in text
    assert f"score: {significant(current.score, 4)}" in text  # the HTML page's figures


def test_narrow_width_never_wraps_a_row(current: SuiteSummary) -> None:
    # Too narrow for the table: blocks of columns, each row one line, its name first.
    text = render_summary(current, width=40)
    names = [b.name for b in current.benchmarks]
    for block in text.split("\n\nscore")[0].split("\n\n"):
        header, *rows = block.splitlines()
        assert header.split()[0] == "bench" and len(header) <= 40
        assert [row.split()[0] for row in rows] == names
        assert all(len(row) <= 40 for row in rows)


def test_empty_summary() -> None:
    text = render_summary(summarize_runs([]))
    assert "no benchmark results" in text and "score: -" in text


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.0, "0"), (0.1655, "0.166"), (3.14159, "3.14"), (12.345, "12.3"),
     (187535.2, "187,535"), (0.00001234, "1.23e-05"), (float("nan"), "nan")],
)
def test_number(value: float | None, text: str) -> None:
    assert number(value) == text
