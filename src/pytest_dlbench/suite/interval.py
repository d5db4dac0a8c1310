"""A suite's ``voir.options.interval``: how often the telemetry monitor samples.

Read here, with the suite, so that a suite with a bad interval fails when it is resolved (the
controller, before anything runs) without importing the monitor; the monitor
(measure/monitor/sampler.py) takes its default and its parser from here.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pytest_dlbench.core.errors import DlbenchError, quoted

__all__ = ["DEFAULT_INTERVAL", "MIN_INTERVAL", "IntervalError", "parse_interval"]

#: Seconds between samples when the suite gives no ``voir.options.interval``.
DEFAULT_INTERVAL = 1.0
# Below this the sampling thread would cost more than it tells (psutil walks /proc each time).
MIN_INTERVAL = 0.01

_UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "m": 60.0, "min": 60.0}
_INTERVAL = re.compile(r"^\s*(?P<num>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[a-z]*)\s*$")


class IntervalError(DlbenchError, ValueError):
    """A ``voir.options.interval`` that is not a positive duration."""


def parse_interval(value: Any) -> float:
    """Seconds from a suite's ``interval``: ``"1s"``, ``"500ms"``, ``"0.5s"``, ``"2m"``, a number
    of seconds, or ``None`` (the default, 1 s). Raises :class:`IntervalError` otherwise."""
    if value is None:
        return DEFAULT_INTERVAL
    if isinstance(value, bool):  # YAML `interval: yes` is not a duration
        raise IntervalError("interval must be a duration like '1s' or '500ms', got "
                            f"{quoted(value)}")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        match = _INTERVAL.match(value.lower())
        if not match or match["unit"] not in _UNITS:
            raise IntervalError(
                f"interval must be a duration like '1s' or '500ms', got {quoted(value)}"
            )
        seconds = float(match["num"]) * _UNITS[match["unit"]]
    else:
        raise IntervalError("interval must be a duration like '1s' or '500ms', got "
                            f"{quoted(value)}")
    if not math.isfinite(seconds) or seconds < MIN_INTERVAL:
        raise IntervalError(f"interval must be at least {MIN_INTERVAL * 1000:g} ms, got "
                            f"{quoted(value)}")
    return seconds
