"""Reading the profiling records (and the scored ones the reports compare with) of a stream,
from its :class:`~pytest_dlbench.measure.records.RunRecords` (records are parsed once)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_dlbench.core.numbers import as_number
from pytest_dlbench.measure.records import RunRecords
from pytest_dlbench.profile.timereport import IntervalSample, StepSample

__all__ = [
    "Record",
    "profile_start",
    "profiled_intervals",
    "profiled_steps",
    "steady_region",
    "steady_rates",
]

Record = Mapping[str, Any]
Records = Iterable[Record] | RunRecords


def _num(value: Any) -> float | None:
    number = as_number(value)
    return number if number is not None and math.isfinite(number) else None


def profile_start(records: Records) -> Record | None:
    """The ``profile`` record that opened the profiled window, None when it never opened."""
    return RunRecords.of(records).profile_start


def profiled_steps(
    records: Records, *, warmup: int | None = None, steps: int | None = None,
    phase: str | None = None,
) -> list[Record]:
    """``profile_step`` records of window positions ``warmup <= k < warmup + steps``, or of
    torch.profiler's ``phase``."""
    out = []
    for r in RunRecords.of(records).profile_steps:
        if phase is not None and r.get("phase") != phase:
            continue
        k = r.get("k")
        if warmup is not None and steps is not None and (
            not isinstance(k, int) or not warmup <= k < warmup + steps
        ):
            continue
        out.append(r)
    return sorted(out, key=lambda r: r.get("step") or 0)


def step_samples(step_records: Sequence[Record]) -> list[StepSample]:
    return [
        StepSample(int(r["step"]), float(r["seconds"]))
        for r in step_records
        if isinstance(r.get("step"), int) and _num(r.get("seconds")) is not None
    ]


def profiled_intervals(records: Records, steps: set[int]) -> list[IntervalSample]:
    """``profile_region`` records of the given steps."""
    out = []
    for r in RunRecords.of(records).profile_regions:
        if r.get("step") not in steps:
            continue
        seconds = _num(r.get("seconds"))
        if seconds is None:
            continue
        out.append(IntervalSample(str(r.get("key")), int(r["step"]), seconds,
                                  _num(r.get("start"))))
    return out


def steady_rates(records: Records) -> list[Record]:
    """The scored window's ``rate`` records (warm-up left out)."""
    return list(RunRecords.of(records).steady)


def steady_region(records: Records, key: str) -> tuple[int, float] | None:
    """(intervals, seconds) of region ``key`` over the windows of the scored run that hold no
    warm-up step; None when no such window has it.

    ``region`` records total a window; their ``step`` is the window's last step, so a window
    is ``(previous record's step, step]``.
    """
    run = RunRecords.of(records)
    warm = [int(r["step"]) for r in run.warmup if isinstance(r.get("step"), int)]
    last_warm = max(warm, default=-1)
    ends = sorted({int(r["step"]) for r in run.regions if isinstance(r.get("step"), int)})
    steady_ends = {end for prev, end in zip([-1, *ends], ends, strict=False) if prev >= last_warm}
    count, seconds = 0, 0.0
    for r in run.regions:
        if r.get("key") != key or r.get("step") not in steady_ends:
            continue
        n, s = r.get("count"), _num(r.get("seconds"))
        if isinstance(n, int) and s is not None:
            count += n
            seconds += s
    return (count, seconds) if count else None
