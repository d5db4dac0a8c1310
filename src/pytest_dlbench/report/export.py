"""Export for github-action-benchmark (``tool: customBiggerIsBetter``).

One entry per benchmark and one for the score. The value is ``perf``, the measured throughput,
not ``perf_adj``: the action charts the value with ``range`` (here ``± std``) as its error bar,
so folding the noise into the value as well would count it twice and make the chart move when
only the noise changed. ``perf_adj`` is in ``extra``, and the score entry (built from
``perf_adj``) carries the penalised figure. A benchmark with no successful run is exported with
value 0, so the chart shows the failure instead of a gap.
"""

from __future__ import annotations

import json
from os import PathLike
from pathlib import Path
from typing import Any

from pytest_dlbench.core.numbers import number, percent
from pytest_dlbench.core.output_files import write_atomic
from pytest_dlbench.results.model import SuiteSummary

__all__ = ["benchmark_action_entries", "export_benchmark_action"]


def _entry(bench: Any) -> dict[str, Any]:
    extra = [f"perf_adj: {number(bench.perf_adj)}", f"n: {bench.n}, fail: {bench.fail}"]
    if bench.std_pct is not None:
        extra.append(f"std%: {percent(bench.std_pct)}")
    if bench.perf is None:
        extra.append("no successful run" if bench.n else "not run")
    entry: dict[str, Any] = {
        "name": bench.name,
        "unit": bench.units,
        "value": float(bench.perf) if bench.perf is not None else 0.0,
        "range": f"± {number(bench.std)}",
        "extra": "\n".join(extra),
    }
    return entry


def benchmark_action_entries(summary: SuiteSummary) -> list[dict[str, Any]]:
    entries = [_entry(b) for b in summary.benchmarks]
    extra = [f"failure rate: {percent(summary.failure_rate)}"]
    if summary.incomplete:
        extra.append(f"incomplete: {', '.join(summary.incomplete)}")
    entries.append({
        "name": "score",
        "unit": "score",
        "value": float(summary.score) if summary.score is not None else 0.0,
        "extra": "\n".join(extra),
    })
    return entries


def export_benchmark_action(summary: SuiteSummary, path: str | PathLike[str]) -> Path:
    """Write the github-action-benchmark JSON list for ``summary`` to ``path``."""
    return write_atomic(path, json.dumps(benchmark_action_entries(summary), indent=2) + "\n")
