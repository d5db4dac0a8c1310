"""Profiling a benchmark run: speed, time, memory, system, summary, snapshot and trace reports.

Plain Python (no pytest); torch and torchinfo are imported only when a report needs them.
See docs/profiling.md. The harness's surface:

- :class:`ProfileConfig` (``parse_cli``, ``from_mapping``, ``merge``, ``to_dict``/``from_dict``)
  and :class:`ProfileError`;
- ``Bench(..., profiled=ProfiledWindow(config))``: the profiled window after the scored steps
  (:class:`ProfiledWindow`, made by the harness: ``measure/`` never imports ``profile/``);
- :func:`finish_profile` after the run, :func:`load_reports` and :func:`render_reports` to show
  the reports again;
- :func:`time_report_from_windows` for a standalone :class:`~pytest_dlbench.measure.timing.Timer`.
"""

from __future__ import annotations

from pytest_dlbench.profile.base import NoteReport, Report
from pytest_dlbench.profile.config import (
    KEYS,
    REPORTS,
    ProfileConfig,
    ProfileError,
    ReportConfig,
    WindowPlan,
)
from pytest_dlbench.profile.finish import build_reports, finish_profile
from pytest_dlbench.profile.timereport import TimeReport, time_report_from_windows
from pytest_dlbench.profile.window import ProfiledWindow
from pytest_dlbench.profile.writer import (
    load_meta,
    load_reports,
    profile_sections,
    render_reports,
    write_reports,
)

__all__ = [
    "KEYS",
    "REPORTS",
    "NoteReport",
    "ProfileConfig",
    "ProfileError",
    "ProfiledWindow",
    "Report",
    "ReportConfig",
    "TimeReport",
    "WindowPlan",
    "build_reports",
    "finish_profile",
    "load_meta",
    "load_reports",
    "profile_sections",
    "render_reports",
    "time_report_from_windows",
    "write_reports",
]
