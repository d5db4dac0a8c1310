"""The results history (docs/architecture.md, "results/ by job"): its files and series
(records), the steps of a series (changes), sessions merged into a baseline (sessions) and
DataFrames of runs, summaries and histories (frames). Stands on the judge, the figures and
the model, below the evaluation.

A lazy face: a name is imported from its module on first use (core/lazy.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_dlbench.core.lazy import face_getattr

if TYPE_CHECKING:
    from pytest_dlbench.results.history.changes import (
        MIN_SEGMENT,
        NOISE_FLOOR,
        PENALTY,
        WINDOW,
        Step,
        Work,
        detect_steps,
        noise_scale,
        segments,
    )
    from pytest_dlbench.results.history.frames import frame, frame_csv, sweep_frame
    from pytest_dlbench.results.history.records import (
        HISTORY,
        BenchSeries,
        Entry,
        GitInfo,
        HistoryError,
        autosave,
        autosave_summary,
        bench_series,
        default_history,
        drifts_from_history,
        git_info,
        keyword_matcher,
        load_history,
        machine_id,
        report_series,
        since,
        summary_machine,
    )
    from pytest_dlbench.results.history.sessions import SessionsError, merge_sessions, session_count

#: Each module of the room and the names of its face.
_HOMES = {
    "changes": (
        "MIN_SEGMENT", "NOISE_FLOOR", "PENALTY", "Step", "WINDOW", "Work", "detect_steps",
        "noise_scale", "segments",
    ),
    "frames": ("frame", "frame_csv", "sweep_frame"),
    "records": (
        "BenchSeries", "Entry", "GitInfo", "HISTORY", "HistoryError", "autosave",
        "autosave_summary", "bench_series", "default_history", "drifts_from_history", "git_info",
        "keyword_matcher", "load_history", "machine_id", "report_series", "since",
        "summary_machine",
    ),
    "sessions": ("SessionsError", "merge_sessions", "session_count"),
}

__all__ = [
    "autosave", "autosave_summary", "bench_series", "BenchSeries", "default_history",
    "detect_steps", "drifts_from_history", "Entry", "frame", "frame_csv", "git_info", "GitInfo",
    "HISTORY", "HistoryError", "keyword_matcher", "load_history", "machine_id", "merge_sessions",
    "MIN_SEGMENT", "NOISE_FLOOR", "noise_scale", "PENALTY", "report_series", "segments",
    "session_count", "SessionsError", "since", "Step", "summary_machine", "sweep_frame", "WINDOW",
    "Work",
]
__getattr__ = face_getattr(__name__, _HOMES)
