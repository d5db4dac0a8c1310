"""What the usage validation of a run says (results/figures/validation.py checks a suite's
``validation.usage`` against the monitor's telemetry): its issues, and the failure it raises in
the process that runs the benchmark, which the harness (run/harness.py) records as the run's
``fail`` with this one line. Here, under the monitor, so that the harness reads it without
importing the results."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pytest_dlbench.core.errors import DlbenchError

__all__ = ["Issue", "ValidationError"]


@dataclass(frozen=True)
class Issue:
    level: Literal["fail", "warn"]
    message: str  # one line


class ValidationError(DlbenchError):
    """The run measured, but not what the suite asked for (GPU load below its threshold).

    ``run.harness.execute`` classifies it as ``fail``, with this one-line message as the reason.
    """

    def __init__(self, issues: Iterable[Issue]) -> None:
        self.issues = tuple(issues)
        fails = [i.message for i in self.issues if i.level == "fail"]
        super().__init__("; ".join(fails or [i.message for i in self.issues]))
