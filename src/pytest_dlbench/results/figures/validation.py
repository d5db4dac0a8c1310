"""Usage validation: a suite's ``validation.usage`` checked against a run's telemetry.

Like milabench's usage check, per sampled GPU: a mean utilisation below
``gpu_load_threshold`` fails the run, a mean memory use below ``gpu_mem_threshold`` only warns.
Thresholds are fractions (``0.5``) or percents (``50``); absent, ``null`` or ``0`` disables a
check. Runs without GPU telemetry (CPU runs, no driver) are not checked.

The means are taken over the timed window (the scored observations, warm-up left out: read
from the ``rate`` records, :func:`~pytest_dlbench.measure.monitor.summary.timed_window`) so
that model building, data preparation and a first step that autotunes, when the GPU idles, do
not fail a short benchmark; a utilisation value counts only when its whole period lies inside
that window (docs/telemetry.md, "GPU load over the scored window"). Pure functions over records
or a :class:`~pytest_dlbench.measure.monitor.summary.MonitorSummary`: no NVML, no pytest.
Its :class:`Issue` and :class:`ValidationError` are in ``measure/monitor/usage.py``, where
the harness that records the failure reads them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_dlbench.measure.monitor.summary import (
    MAX_UTIL_PERIOD_S,
    MonitorSummary,
    scored_spans,
    summarize_telemetry,
    timed_window,
)
from pytest_dlbench.measure.monitor.usage import Issue, ValidationError
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.measure.stream import Event, Stream, read_stream

__all__ = [
    "check_usage",
    "validate_usage",
]

_GIB = 1024**3


def _threshold(usage: Mapping[str, Any], key: str, issues: list[Issue]) -> float | None:
    """The fraction a threshold stands for, None when disabled; a bad value warns, never
    crashes a run that already measured."""
    value = usage.get(key)
    if value is None or value is False:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0 or number > 100:
        issues.append(Issue("warn", f"validation.usage.{key}: {value!r} is not a fraction "
                                    "or a percent; not checked"))
        return None
    if number == 0:
        return None
    return number / 100.0 if number > 1 else number


def _percent(x: float) -> str:
    return f"{x:.0f}%"


def check_usage(
    source: MonitorSummary | Iterable[Mapping[str, Any]] | RunRecords,
    validation: Mapping[str, Any] | None,
) -> list[Issue]:
    """The usage issues of a run: ``fail`` for a GPU load below ``gpu_load_threshold``, ``warn``
    for GPU memory below ``gpu_mem_threshold``. ``source`` is the run's stream records (the
    timed window is used, see the module docstring) or a :class:`MonitorSummary` (all its
    samples). No GPU telemetry: no issue."""
    usage = (validation or {}).get("usage") or {}
    if not isinstance(usage, Mapping):
        return []
    issues: list[Issue] = []
    load = _threshold(usage, "gpu_load_threshold", issues)
    mem = _threshold(usage, "gpu_mem_threshold", issues)
    if load is None and mem is None:
        return issues
    window: tuple[float, float] | None = None
    if isinstance(source, MonitorSummary):
        summary, windowed = source, False
        whole_util = {g.index: g.mean_util for g in summary.gpus}
    else:
        records = RunRecords.of(source)  # parsed once, read twice
        window = timed_window(records)
        windowed = window is not None
        if window is not None:
            summary = summarize_telemetry(records, start=window[0], end=window[1],
                                          spans=scored_spans(records))
        else:
            summary = summarize_telemetry(records)
        whole_util = {g.index: g.mean_util for g in summarize_telemetry(records).gpus}
    if not summary.gpu:
        return issues  # a CPU run, or no driver: nothing to validate
    if not summary.gpus:
        where = "in the timed window" if windowed else "at all"
        interval = f" (sampled every {summary.interval:g} s)" if summary.interval else ""
        issues.append(Issue("warn", f"GPU usage not validated: no GPU sample {where}{interval}"))
        return issues
    several = len(summary.gpus) > 1
    for gpu in summary.gpus:
        name = f"GPU {gpu.index}" if several else "GPU"
        if load is not None:
            if gpu.mean_util is None and window is not None and (
                    whole_util.get(gpu.index) is not None):
                why = _no_window_util(window, gpu.util_period_s)
                issues.append(Issue("warn", f"{name} load not validated: {why}"))
            elif gpu.mean_util is None:
                issues.append(Issue("warn", f"{name} load not validated: NVML gives no "
                                            "utilisation for it"))
            elif gpu.mean_util < load * 100.0:
                issues.append(Issue(
                    "fail",
                    f"{name} load {_percent(gpu.mean_util)} below the {_percent(load * 100)} "
                    f"threshold (mean of {gpu.samples} samples, max "
                    f"{_percent(gpu.max_util or 0.0)})",
                ))
        fraction = gpu.mean_mem_fraction
        if mem is not None and fraction is not None and fraction < mem:
            used, total = gpu.mean_mem_used or 0.0, gpu.mem_total or 0
            issues.append(Issue(
                "warn",
                f"{name} memory {_percent(fraction * 100)} below the {_percent(mem * 100)} "
                f"threshold (mean {used / _GIB:.1f} of {total / _GIB:.1f} GiB, "
                f"peak {(gpu.peak_mem_used or 0) / _GIB:.1f} GiB)",
            ))
    return issues


def _no_window_util(window: tuple[float, float], period: float | None) -> str:
    """Why a GPU has utilisation readings but none for the scored window."""
    length = max(0.0, window[1] - window[0])
    if period is None:
        return (f"no utilisation reading whose period lies inside the {length:.2g} s scored "
                f"window (NVML averages each over up to {MAX_UTIL_PERIOD_S:g} s: the "
                "readings in it mostly describe the warm-up before it)")
    return (f"no utilisation sample whose {period:.2g} s period lies inside the {length:.2g} s "
            "scored window")


def _records_of(stream: Stream) -> Sequence[Mapping[str, Any]]:
    """What ``stream`` holds so far: a NullStream's list, or a StreamWriter's file (flushed
    after every record, so reading it back in the writing process is complete)."""
    records = getattr(stream, "records", None)
    if isinstance(records, list):
        return records
    path = getattr(stream, "path", None)
    return read_stream(path) if path is not None else []


def validate_usage(
    stream: Stream,
    validation: Mapping[str, Any] | None,
    *,
    source: MonitorSummary | Iterable[Mapping[str, Any]] | None = None,
) -> list[Issue]:
    """Check the run written to ``stream`` (or ``source``): write one ``warning`` record per
    warning, raise :class:`ValidationError` when an issue fails the run; return the issues."""
    usage = (validation or {}).get("usage")
    if not usage:
        return []  # validation is off unless the suite asks (milabench's default)
    issues = check_usage(_records_of(stream) if source is None else source, validation)
    for issue in issues:
        if issue.level == "warn":
            stream.write(Event.WARNING, source="validation", message=issue.message)
    if any(i.level == "fail" for i in issues):
        raise ValidationError(issues)
    return issues

