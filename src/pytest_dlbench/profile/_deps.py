"""Every import of the harness's stream, scoring and telemetry modules, in one place.

Those modules are moving (``stream`` -> ``measure/stream``, ``monitor`` -> ``measure/monitor``,
``scoring`` -> ``results/scoring``): when they do, this file is the only one to change.
"""

from __future__ import annotations

from pytest_dlbench.monitor import MonitorSummary, summarize_telemetry
from pytest_dlbench.scoring import run_from_records
from pytest_dlbench.stream import read_stream

__all__ = ["MonitorSummary", "read_stream", "run_from_records", "summarize_telemetry"]
