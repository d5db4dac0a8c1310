"""What a run's figures are (docs/architecture.md, "results/ by job"): the score and its
formulas (scoring, milabench_score), the rate's ceiling (plausibility), accelerator peaks and
MFU (peaks), compiled speed-ups (compiled), scaling rows, the sweep's table, telemetry and its
usage checks (telemetry, validation), a busy machine (busy), a figure in doubt (doubt) and
the machine's readiness and differences (machine). Stands on the model room.

A lazy face: a name is imported from its module on first use (core/lazy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_dlbench.core.lazy import face_getattr

if TYPE_CHECKING:
    from pytest_dlbench.results.figures.busy import (
        BUSY_CORES,
        busy_note,
        busy_share,
        busy_stats,
        machine_busy,
        outside_cores,
    )
    from pytest_dlbench.results.figures.compiled import CompileRow, compile_rows, compile_summary
    from pytest_dlbench.results.figures.doubt import figure_doubt, figures_in_doubt
    from pytest_dlbench.results.figures.machine import (
        baseline_warnings,
        machine_differences,
        readiness_error,
        readiness_problems,
        readiness_warning,
        render_state,
        state_differences,
    )
    from pytest_dlbench.results.figures.milabench_score import (
        MILABENCH,
        MILARUN,
        SCORES,
        bench_figure,
        counted_as_zero,
        suite_score,
        trimmed_mean,
    )
    from pytest_dlbench.results.figures.peaks import (
        CEILING_ERROR,
        MFU_ERROR,
        MIG_REASON,
        dtype_of,
        flops_notes,
        no_mfu_reason,
        table_peak,
    )
    from pytest_dlbench.results.figures.plausibility import (
        FACTOR,
        WallClockCheck,
        timed_by_bench,
        wall_clock_check,
    )
    from pytest_dlbench.results.figures.reference import (
        SLOW_BELOW,
        milabench_arguments,
        nearest_published,
        reference_lines,
    )
    from pytest_dlbench.results.figures.scaling import scaling_rows
    from pytest_dlbench.results.figures.scoring import (
        MAX_STD_PENALTY,
        UNRELIABLE_STD,
        block_rates,
        load_run,
        milabench_figure,
        run_from_records,
        step_stats,
        summarize_bench,
        summarize_dir,
        summarize_runs,
    )
    from pytest_dlbench.results.figures.sweep import SweepRow, param_names, sweep_csv, sweep_rows
    from pytest_dlbench.results.figures.telemetry import telemetry_stats
    from pytest_dlbench.results.figures.validation import check_usage, validate_usage

#: Each module of the room and the names of its face.
_HOMES = {
    "busy": (
        "BUSY_CORES", "busy_note", "busy_share", "busy_stats", "machine_busy", "outside_cores",
    ),
    "compiled": ("CompileRow", "compile_rows", "compile_summary"),
    "doubt": ("figure_doubt", "figures_in_doubt"),
    "machine": (
        "baseline_warnings", "machine_differences", "readiness_error", "readiness_problems",
        "readiness_warning", "render_state", "state_differences",
    ),
    "milabench_score": (
        "MILABENCH", "MILARUN", "SCORES", "bench_figure", "counted_as_zero", "suite_score",
        "trimmed_mean",
    ),
    "peaks": (
        "CEILING_ERROR", "MFU_ERROR", "MIG_REASON", "dtype_of", "flops_notes", "no_mfu_reason",
        "table_peak",
    ),
    "plausibility": ("FACTOR", "WallClockCheck", "timed_by_bench", "wall_clock_check"),
    "reference": ("SLOW_BELOW", "milabench_arguments", "nearest_published", "reference_lines"),
    "scaling": ("scaling_rows",),
    "scoring": (
        "MAX_STD_PENALTY", "UNRELIABLE_STD", "block_rates", "load_run", "milabench_figure",
        "run_from_records", "step_stats", "summarize_bench", "summarize_dir", "summarize_runs",
    ),
    "sweep": ("SweepRow", "param_names", "sweep_csv", "sweep_rows"),
    "telemetry": ("telemetry_stats",),
    "validation": ("check_usage", "validate_usage"),
}

__all__ = [
    "baseline_warnings", "bench_figure", "block_rates", "BUSY_CORES", "busy_note", "busy_share",
    "busy_stats", "CEILING_ERROR", "check_usage", "compile_rows", "compile_summary", "CompileRow",
    "counted_as_zero", "dtype_of", "FACTOR", "figure_doubt", "figures_in_doubt", "flops_notes",
    "load_run", "machine_busy", "machine_differences", "MAX_STD_PENALTY", "MFU_ERROR",
    "MIG_REASON", "MILABENCH", "milabench_arguments", "milabench_figure", "MILARUN",
    "nearest_published",
    "no_mfu_reason", "outside_cores", "param_names", "readiness_error", "readiness_problems",
    "readiness_warning", "reference_lines", "render_state", "run_from_records", "scaling_rows",
    "SCORES", "SLOW_BELOW", "state_differences", "step_stats", "suite_score", "summarize_bench",
    "summarize_dir", "summarize_runs", "sweep_csv", "sweep_rows", "SweepRow", "table_peak",
    "telemetry_stats", "timed_by_bench", "trimmed_mean", "UNRELIABLE_STD", "validate_usage",
    "wall_clock_check", "WallClockCheck",
]
__getattr__ = face_getattr(__name__, _HOMES)
