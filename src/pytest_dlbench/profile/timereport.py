"""The time report: every timer region of the profiled steps, per interval, and what is left.

Built from per-step samples (a step's seconds, each region interval's step, seconds and start
within the step), which come from the stream's ``profile_step``/``profile_region`` records or
from a standalone :class:`~pytest_dlbench.measure.timing.Timer` read with ``intervals=True``
(:func:`time_report_from_windows`), so a training script without pytest gets the same report.

Regions may nest (``attention`` in ``forward``) or overlap (DDP's ``comm`` in ``backward``). A
region whose every interval lies inside another region's interval of the same step is *nested*
(its ``parent`` is that region); the others are *top-level*. ``rest`` is the step time that the
top-level regions do not account for (fetching the batch, logging, the harness): step minus the
top-level regions' sum, so that top-level + rest = step. When top-level regions overlap each
other, their sum counts the overlap twice and ``rest`` goes negative by that much; the report
says so.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, NamedTuple

from pytest_dlbench.core import numbers as fmt
from pytest_dlbench.profile._tables import p95, table
from pytest_dlbench.profile.base import register

__all__ = [
    "EventStats",
    "IntervalSample",
    "RegionStats",
    "StepSample",
    "TimeReport",
    "build_time_report",
    "time_report_from_windows",
]

# Containment tolerance: marks are taken one after the other, so a region that ends as its
# parent ends may look a few hundred nanoseconds longer on a real clock.
_SLACK_S = 2e-6


class StepSample(NamedTuple):
    index: int  # type: ignore[assignment]  # a field named like tuple.index, on purpose
    seconds: float


class IntervalSample(NamedTuple):
    key: str
    step: int
    seconds: float
    start: float | None  # seconds from the step's start; None when unknown


@dataclass(frozen=True)
class RegionStats:
    """One row: a region (or ``rest``/``step``) over the profiled steps."""

    key: str
    count: int
    mean: float
    median: float
    p95: float
    total: float
    share: float  # of the step time
    parent: str | None = None  # the region it is nested in; None for a top-level one

    @classmethod
    def of(cls, key: str, values: Sequence[float], step_total: float,
           parent: str | None = None) -> RegionStats:
        total = float(sum(values))
        return cls(
            key=key,
            count=len(values),
            mean=total / len(values) if values else 0.0,
            median=float(statistics.median(values)) if values else 0.0,
            p95=p95(values) if values else 0.0,
            total=total,
            share=total / step_total if step_total > 0 else 0.0,
            parent=parent,
        )


@dataclass(frozen=True)
class EventStats:
    """A top-level profiler event (verbose time report): what torch.profiler saw per step."""

    name: str
    count: int
    total: float  # seconds of CPU time, children included
    share: float  # of the profiled steps' CPU time


@register
@dataclass(frozen=True)
class TimeReport:
    name: ClassVar[str] = "time"

    source: str  # "profiled window" or "timer"
    steps: int
    first_step: int | None
    last_step: int | None
    step: RegionStats
    regions: tuple[RegionStats, ...]
    rest: RegionStats
    overlap: float = 0.0  # seconds counted twice by overlapping top-level regions
    events: tuple[EventStats, ...] = ()
    note: str = ""

    @property
    def top_level(self) -> tuple[RegionStats, ...]:
        return tuple(r for r in self.regions if r.parent is None)

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TimeReport:
        return cls(
            source=str(data.get("source") or ""),
            steps=int(data.get("steps") or 0),
            first_step=data.get("first_step"),
            last_step=data.get("last_step"),
            step=RegionStats(**data["step"]),
            regions=tuple(RegionStats(**r) for r in data.get("regions") or ()),
            rest=RegionStats(**data["rest"]),
            overlap=float(data.get("overlap") or 0.0),
            events=tuple(EventStats(**e) for e in data.get("events") or ()),
            note=str(data.get("note") or ""),
        )

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for r in (*self.regions, self.rest, self.step):
            row = asdict(r)
            row["level"] = ("step" if r is self.step else "rest" if r is self.rest
                            else "nested" if r.parent else "top")
            out.append(row)
        return out

    def _headline(self) -> str:
        if self.steps == 0:
            return "time: no timed step"
        span = ""
        if self.first_step is not None and self.last_step is not None:
            span = (f"step {self.first_step}" if self.first_step == self.last_step
                    else f"steps {self.first_step}-{self.last_step}")
        where = (f"{span}, after the scored ones (timer only)" if self.source == "profiled window"
                 else f"{self.steps} timed step{'s' if self.steps != 1 else ''} ({span})")
        return (f"time: {where}; step {fmt.duration(self.step.mean)} mean, "
                f"{fmt.duration(self.step.p95)} p95")

    def render(self, verbose: bool = False) -> str:
        lines = [self._headline()]
        if self.note:
            lines.append(f"  {self.note}")
        if self.steps == 0:
            return "\n".join(lines)
        header = ["region", "count", "mean", "median", "p95", "total", "share"]
        rows = []
        for r in (*self.ordered(), self.rest, self.step):
            label = f"  {r.key} (in {r.parent})" if r.parent else r.key
            rows.append([label, fmt.count(r.count), fmt.duration(r.mean), fmt.duration(r.median),
                         fmt.duration(r.p95), fmt.duration(r.total), fmt.rough_percent(r.share)])
        lines.append(table(header, rows))
        if self.overlap > 0.01 * self.step.total:
            lines.append(f"  top-level regions overlap by {fmt.duration(self.overlap)} "
                         f"({fmt.rough_percent(self.overlap / self.step.total)} of the step): "
                         "rest is short by that much")
        if verbose and self.events:
            lines.append("  top-level profiler events (CPU time, children included)")
            ev_rows = [[e.name, fmt.count(e.count), fmt.duration(e.total),
                        fmt.rough_percent(e.share)]
                       for e in self.events]
            lines.append(table(["event", "count", "total", "share"], ev_rows, indent="    "))
        return "\n".join(lines)

    def ordered(self) -> list[RegionStats]:
        """Top-level regions by total time, each followed by the regions nested in it."""
        children: dict[str | None, list[RegionStats]] = defaultdict(list)
        for r in self.regions:
            children[r.parent].append(r)
        out: list[RegionStats] = []
        seen: set[str] = set()

        def visit(parent: str | None) -> None:
            for r in sorted(children.get(parent, ()), key=lambda r: -r.total):
                if r.key in seen:
                    continue
                seen.add(r.key)
                out.append(r)
                visit(r.key)

        visit(None)
        out.extend(r for r in self.regions if r.key not in seen)  # a cycle cannot happen; safe
        return out


def _parents(intervals: Sequence[IntervalSample]) -> dict[str, str | None]:
    """For every key: the key of the region that contains all its intervals, or None.

    An interval is contained in another key's interval of the same step that starts no later
    and ends no earlier; the parent is the one most often containing it (the smallest such
    interval each time). A key with an interval contained in nothing is top-level.
    """
    by_step: dict[int, list[IntervalSample]] = defaultdict(list)
    for iv in intervals:
        by_step[iv.step].append(iv)
    votes: dict[str, Counter[str]] = defaultdict(Counter)
    top: set[str] = set()
    for step_ivs in by_step.values():
        for iv in step_ivs:
            if iv.start is None:
                top.add(iv.key)
                continue
            end = iv.start + iv.seconds
            best: IntervalSample | None = None
            for other in step_ivs:
                if other.key == iv.key or other.start is None:
                    continue
                if other.seconds <= iv.seconds:
                    continue
                inside = (other.start <= iv.start + _SLACK_S
                           and other.start + other.seconds >= end - _SLACK_S)
                if inside and (best is None or other.seconds < best.seconds):
                    best = other
            if best is None:
                top.add(iv.key)
            else:
                votes[iv.key][best.key] += 1
    keys = {iv.key for iv in intervals}
    return {
        k: (None if k in top or not votes[k] else votes[k].most_common(1)[0][0]) for k in keys
    }


def _union(spans: list[tuple[float, float]]) -> float:
    total = 0.0
    end = float("-inf")
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def build_time_report(
    steps: Iterable[StepSample],
    intervals: Iterable[IntervalSample],
    *,
    source: str = "profiled window",
    events: Sequence[EventStats] = (),
    note: str = "",
) -> TimeReport:
    """The report over ``steps``; intervals of other steps are ignored."""
    step_list = sorted({s.index: s for s in steps}.values())
    seconds = {s.index: s.seconds for s in step_list}
    ivs = [iv for iv in intervals if iv.step in seconds]
    step_total = float(sum(seconds.values()))
    parents = _parents(ivs)
    per_key: dict[str, list[float]] = defaultdict(list)
    for iv in ivs:
        per_key[iv.key].append(iv.seconds)
    regions = tuple(
        RegionStats.of(key, values, step_total, parents.get(key))
        for key, values in per_key.items()
    )
    # rest per step: the step minus its top-level intervals; overlap: what those count twice.
    top_by_step: dict[int, float] = defaultdict(float)
    spans_by_step: dict[int, list[tuple[float, float]]] = defaultdict(list)
    overlap = 0.0
    for iv in ivs:
        if parents.get(iv.key) is None:
            top_by_step[iv.step] += iv.seconds
            if iv.start is not None:
                spans_by_step[iv.step].append((iv.start, iv.start + iv.seconds))
    for spans in spans_by_step.values():
        overlap += sum(b - a for a, b in spans) - _union(spans)
    rest = [seconds[i] - top_by_step.get(i, 0.0) for i in seconds]
    return TimeReport(
        source=source,
        steps=len(step_list),
        first_step=step_list[0].index if step_list else None,
        last_step=step_list[-1].index if step_list else None,
        step=RegionStats.of("step", list(seconds.values()), step_total),
        regions=regions,
        rest=RegionStats.of("rest", rest, step_total),
        overlap=max(0.0, overlap),
        events=tuple(events),
        note=note,
    )


def time_report_from_windows(windows: Any, *, skip: int = 0) -> TimeReport:
    """The time report of a standalone :class:`~pytest_dlbench.measure.timing.Timer`.

    ``windows``: one :class:`~pytest_dlbench.measure.timing.Window` or several, each from
    ``timer.read(intervals=True)``; the first ``skip`` steps (warm-up) are left out.
    """
    if hasattr(windows, "steps"):
        windows = [windows]
    steps: list[StepSample] = []
    intervals: list[IntervalSample] = []
    for window in windows:
        steps.extend(StepSample(s.index, s.seconds) for s in window.steps)
        intervals.extend(IntervalSample(*iv) for iv in window.intervals)
    steps = [s for s in sorted(steps) if s.index >= (min(s.index for s in steps) + skip)] \
        if steps else []
    note = ""
    if steps and not intervals:
        note = "no region intervals: read the timer with timer.read(intervals=True)"
    return build_time_report(steps, intervals, source="timer", note=note)


def top_level_events(events: Iterable[Any], limit: int = 20) -> list[EventStats]:
    """What torch.profiler saw directly inside each profiled step (``ProfilerStep#N``): the
    timer's regions (named in the trace while profiling) and anything outside them, aggregated
    by name, largest CPU time first. ``events``: ``prof.events()``."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    step_total = 0.0
    for event in events:
        name = str(getattr(event, "name", ""))
        if name.startswith("ProfilerStep"):
            step_total += float(getattr(event, "cpu_time_total", 0.0) or 0.0)
            continue
        parent = getattr(event, "cpu_parent", None)
        if parent is None or not str(getattr(parent, "name", "")).startswith("ProfilerStep"):
            continue
        acc = totals[name]
        acc[0] += 1
        acc[1] += float(getattr(event, "cpu_time_total", 0.0) or 0.0)
    out = [
        EventStats(name, int(n), us * 1e-6, us / step_total if step_total > 0 else 0.0)
        for name, (n, us) in totals.items()
    ]
    out.sort(key=lambda e: -e.total)
    return out[:limit]
