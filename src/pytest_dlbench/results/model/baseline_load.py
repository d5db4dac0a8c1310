"""A baseline file read for comparison (``--compare``/``--bench-compare``): the summary, or the
exit status and line that say why there is none. Kept light (the file is read on demand by
results/model/baseline.py): the plugin's reporter and ``dlbench`` import it early.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_dlbench.core.protocol import BASELINE_MISSING, USAGE_ERROR

if TYPE_CHECKING:
    from pytest_dlbench.results.model.summary import SuiteSummary

__all__ = ["BaselineLoad", "load_baseline"]


@dataclass(frozen=True)
class BaselineLoad:
    """A baseline file read for comparison: the summary, or why there is none."""

    summary: SuiteSummary | None  # typed: results/model/summary.py
    status: int = 0  # 0 (read: the gate's OK), BASELINE_MISSING or USAGE_ERROR
    message: str = ""


def load_baseline(path: str) -> BaselineLoad:
    """Read a saved summary. A missing file is :data:`BASELINE_MISSING` (the caller decides
    whether that is an error); a corrupt or foreign one is :data:`USAGE_ERROR`, one line."""
    from pytest_dlbench.core.errors import DlbenchError
    from pytest_dlbench.results.model.baseline import BaselineMissing, load_summary

    try:
        return BaselineLoad(load_summary(path))
    except BaselineMissing:
        return BaselineLoad(None, BASELINE_MISSING, f"baseline not found: {path}")
    except DlbenchError as exc:
        return BaselineLoad(None, USAGE_ERROR, str(exc))
