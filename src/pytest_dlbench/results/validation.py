"""Usage validation (a suite's ``validation.usage``) and the telemetry numbers of a run.

Like milabench's usage check, per sampled GPU: a mean utilisation below
``gpu_load_threshold`` fails the run, a mean memory use below ``gpu_mem_threshold`` only warns.
Thresholds are fractions (``0.5``) or percents (``50``); absent, ``null`` or ``0`` disables a
check. Runs without GPU telemetry (CPU runs, no driver) are not checked.

The means are taken over the timed window (from the first observation's start to the last
one's end, read from the ``rate`` records) so that model building and data preparation, when
the GPU idles, do not fail a short benchmark. Pure functions over records or a
:class:`~pytest_dlbench.measure.monitor.MonitorSummary`: no NVML, no pytest.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pytest_dlbench.errors import DlbenchError
from pytest_dlbench.measure.monitor import MonitorSummary, summarize_telemetry
from pytest_dlbench.measure.stream import Stream, read_stream

__all__ = [
    "Issue",
    "ValidationError",
    "check_usage",
    "combine_stats",
    "telemetry_stats",
    "timed_window",
    "validate_usage",
]

_GIB = 1024**3


@dataclass(frozen=True)
class Issue:
    level: Literal["fail", "warn"]
    message: str  # one line


class ValidationError(DlbenchError):
    """The run measured, but not what the suite asked for (GPU load below its threshold).

    ``runner.execute`` classifies it as ``fail``, with this one-line message as the reason.
    """

    def __init__(self, issues: Iterable[Issue]) -> None:
        self.issues = tuple(issues)
        fails = [i.message for i in self.issues if i.level == "fail"]
        super().__init__("; ".join(fails or [i.message for i in self.issues]))


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


def timed_window(records: Iterable[Mapping[str, Any]]) -> tuple[float, float] | None:
    """(start, end) in UNIX seconds of the observations (``rate`` records, warm-up included),
    None without timed observations."""
    lo = hi = None
    for r in records:
        if r.get("event") != "rate":
            continue
        t = r.get("time")
        if not isinstance(t, (int, float)) or not math.isfinite(t):
            continue
        seconds = r.get("seconds")
        start = t - seconds if isinstance(seconds, (int, float)) and seconds > 0 else t
        lo = start if lo is None else min(lo, start)
        hi = t if hi is None else max(hi, t)
    return (lo, hi) if lo is not None and hi is not None else None


def _percent(x: float) -> str:
    return f"{x:.0f}%"


def check_usage(
    source: MonitorSummary | Iterable[Mapping[str, Any]],
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
    if isinstance(source, MonitorSummary):
        summary, windowed = source, False
    else:
        records = list(source)
        window = timed_window(records)
        windowed = window is not None
        if window is not None:
            summary = summarize_telemetry(records, start=window[0], end=window[1])
        else:
            summary = summarize_telemetry(records)
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
            if gpu.mean_util is None:
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


def _records_of(stream: Stream) -> list[Mapping[str, Any]]:
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
            stream.write("warning", source="validation", message=issue.message)
    if any(i.level == "fail" for i in issues):
        raise ValidationError(issues)
    return issues


def telemetry_stats(records: Iterable[Mapping[str, Any]]) -> dict[str, float | int | None]:
    """The report's telemetry numbers of one run, from its stream records (None when unknown):

    - ``peak_gpu_mem_bytes``: the largest per-GPU peak of memory used (whole run);
    - ``peak_rss_bytes``: the peak RSS of the benchmark's process tree (whole run);
    - ``energy_j``: joules of all sampled GPUs, from the monitor's start to its stop;
    - ``mean_gpu_util``: percent, over the timed window (all samples without one).
    """
    records = list(records)
    whole = summarize_telemetry(records)
    window = timed_window(records)
    timed = summarize_telemetry(records, start=window[0], end=window[1]) if window else whole
    util = timed.mean_gpu_util if timed.gpus else whole.mean_gpu_util
    return {
        "peak_gpu_mem_bytes": whole.peak_gpu_mem_bytes,
        "peak_rss_bytes": whole.peak_rss_bytes,
        "energy_j": whole.energy_j,
        "mean_gpu_util": util,
    }


def combine_stats(
    stats: Iterable[Mapping[str, float | int | None]],
) -> dict[str, float | int | None]:
    """One benchmark's numbers from its runs' :func:`telemetry_stats`: the peaks are the largest
    run's, the energy is the sum (every replica and repeat drew it), the utilisation the mean
    of the runs that have one. None where no run knows."""
    stats = list(stats)

    def known(key: str) -> list[float]:
        return [float(v) for s in stats if (v := s.get(key)) is not None]

    gpu_mem, rss = known("peak_gpu_mem_bytes"), known("peak_rss_bytes")
    energy, util = known("energy_j"), known("mean_gpu_util")
    return {
        "peak_gpu_mem_bytes": int(max(gpu_mem)) if gpu_mem else None,
        "peak_rss_bytes": int(max(rss)) if rss else None,
        "energy_j": sum(energy) if energy else None,
        "mean_gpu_util": sum(util) / len(util) if util else None,
    }
