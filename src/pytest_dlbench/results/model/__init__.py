"""The run's data model and its saved format (docs/architecture.md, "results/ by job"):
``RunResult`` (run_result), ``BenchSummary`` and ``SuiteSummary`` (summary), each figure of a
benchmark declared once (figures), their JSON and its migrations (summary_json), the summary's
file (baseline) and a baseline read for comparison (baseline_load). The bottom room: it
imports no other room.

A lazy face: a name is imported from its module on first use (core/lazy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_dlbench.core.lazy import face_getattr

if TYPE_CHECKING:
    from pytest_dlbench.results.model.baseline import (
        BaselineError,
        BaselineMissing,
        load_summary,
        save_summary,
        summary_dict,
    )
    from pytest_dlbench.results.model.baseline_load import BaselineLoad, load_baseline
    from pytest_dlbench.results.model.figures import FIGURES, Figure, figure, shown_figures
    from pytest_dlbench.results.model.run_result import TOTAL_TIME, Points, RunResult
    from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary, combine_stats
    from pytest_dlbench.results.model.summary_json import (
        SCHEMA,
        VERSION,
        SummaryFormatError,
        migrate,
    )

#: Each module of the room and the names of its face.
_HOMES = {
    "baseline": (
        "BaselineError", "BaselineMissing", "load_summary", "save_summary", "summary_dict",
    ),
    "baseline_load": ("BaselineLoad", "load_baseline"),
    "figures": ("FIGURES", "Figure", "figure", "shown_figures"),
    "run_result": ("Points", "RunResult", "TOTAL_TIME"),
    "summary": ("BenchSummary", "SuiteSummary", "combine_stats"),
    "summary_json": ("SCHEMA", "SummaryFormatError", "VERSION", "migrate"),
}

__all__ = [
    "BaselineError", "BaselineLoad", "BaselineMissing", "BenchSummary", "combine_stats",
    "FIGURES", "Figure", "figure", "shown_figures",
    "load_baseline", "load_summary", "migrate", "Points", "RunResult", "save_summary", "SCHEMA",
    "SuiteSummary", "summary_dict", "SummaryFormatError", "TOTAL_TIME", "VERSION",
]
__getattr__ = face_getattr(__name__, _HOMES)
