"""What a run's telemetry amounts to: the :class:`MonitorSummary` of the GPUs and the process
tree, summed up by the :class:`~pytest_dlbench.measure.monitor.Monitor` itself as it samples
(the ``monitor_summary`` record) and from a stream read back (:func:`summarize_telemetry`: the
profile's system report, the results' telemetry numbers and the usage validation).

Pure functions over records: no NVML, no psutil, no pytest.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.measure.records import RunRecords

__all__ = [
    "MAX_UTIL_PERIOD_S",
    "GpuSummary",
    "MonitorSummary",
    "Summarizer",
    "as_float",
    "as_int",
    "scored_spans",
    "summarize_telemetry",
    "timed_window",
]


#: The longest period NVML's utilisation averages over ("between 1 second and 1/6 second,
#: depending on the product"): a reading without a driver time stamp counts in a window only
#: when the whole period before it lies inside (docs/telemetry.md).
MAX_UTIL_PERIOD_S = 1.0


def as_float(value: Any) -> float | None:
    """``value`` as a float; None when it is None or not a number."""
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def as_int(value: Any) -> int | None:
    """``value`` as an int; None when it is None, not a number or not finite (``1e999`` in
    a stream someone else wrote reads as infinity)."""
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass(frozen=True)
class GpuSummary:
    index: int
    samples: int  # samples with a utilisation value
    mean_util: float | None  # percent
    max_util: float | None
    mean_mem_used: float | None  # bytes
    peak_mem_used: int | None  # bytes, whole device (other processes and the CUDA context too)
    mem_total: int | None
    energy_j: float | None
    peak_power_w: float | None
    max_temp_c: float | None
    # Over a window: the period of the driver's utilisation samples (seconds; None: readings
    # without driver time stamps, counted when MAX_UTIL_PERIOD_S before them lies inside).
    util_period_s: float | None = None

    @property
    def mean_mem_fraction(self) -> float | None:
        if self.mean_mem_used is None or not self.mem_total:
            return None
        return self.mean_mem_used / self.mem_total

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class MonitorSummary:
    """What a run's telemetry amounts to (the ``monitor_summary`` record)."""

    gpu: bool
    reason: str  # why there is no GPU telemetry; "" with GPUs
    interval: float | None
    samples: int
    duration_s: float | None
    gpus: tuple[GpuSummary, ...] = ()
    peak_rss_bytes: int | None = None
    mean_cpu_percent: float | None = None
    disk_read_bytes: int | None = None
    disk_write_bytes: int | None = None
    errors: int = 0
    last_error: str = ""
    # torch's own peaks on the run's device (monitor/torch_memory.py), beside NVML's
    # device-wide peak_mem_used; None on a CPU run or without torch.
    torch_max_allocated_bytes: int | None = None
    torch_max_reserved_bytes: int | None = None

    @property
    def peak_gpu_mem_bytes(self) -> int | None:
        """The largest per-GPU peak (what must fit in one device's memory)."""
        peaks = [g.peak_mem_used for g in self.gpus if g.peak_mem_used is not None]
        return max(peaks) if peaks else None

    @property
    def energy_j(self) -> float | None:
        """Energy of all sampled GPUs together."""
        values = [g.energy_j for g in self.gpus if g.energy_j is not None]
        return sum(values) if values else None

    @property
    def mean_gpu_util(self) -> float | None:
        """Mean of the per-GPU mean utilisations, in percent."""
        values = [g.mean_util for g in self.gpus if g.mean_util is not None]
        return sum(values) / len(values) if values else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "reason": self.reason,
            "interval": self.interval,
            "samples": self.samples,
            "duration_s": self.duration_s,
            "gpus": [g.to_dict() for g in self.gpus],
            "peak_gpu_mem_bytes": self.peak_gpu_mem_bytes,
            "energy_j": self.energy_j,
            "mean_gpu_util": self.mean_gpu_util,
            "peak_rss_bytes": self.peak_rss_bytes,
            "mean_cpu_percent": self.mean_cpu_percent,
            "disk_read_bytes": self.disk_read_bytes,
            "disk_write_bytes": self.disk_write_bytes,
            "errors": self.errors,
            "last_error": self.last_error,
            "torch_max_allocated_bytes": self.torch_max_allocated_bytes,
            "torch_max_reserved_bytes": self.torch_max_reserved_bytes,
        }


class _GpuAcc:
    def __init__(self, index: int) -> None:
        self.index = index
        self.util: list[float] = []
        self.mem: list[float] = []
        self.peak_mem: int | None = None
        self.mem_total: int | None = None
        self.energy: float | None = None
        self.power: float | None = None
        self.temp: float | None = None
        self.util_period: float | None = None

    def add(self, g: Mapping[str, Any]) -> None:
        util, used = as_float(g.get("util")), as_int(g.get("mem_used"))
        if util is not None:
            self.util.append(util)
        if used is not None:
            self.mem.append(float(used))
            self.peak_mem = used if self.peak_mem is None else max(self.peak_mem, used)
        self.mem_total = as_int(g.get("mem_total")) or self.mem_total
        energy = as_float(g.get("energy_j"))
        if energy is not None:
            self.energy = energy  # cumulative: the last known value is the run's
        self.power = _max(self.power, as_float(g.get("power_w")))
        self.temp = _max(self.temp, as_float(g.get("temp_c")))

    def summary(self) -> GpuSummary:
        return GpuSummary(
            index=self.index,
            samples=len(self.util),
            mean_util=sum(self.util) / len(self.util) if self.util else None,
            max_util=max(self.util) if self.util else None,
            mean_mem_used=sum(self.mem) / len(self.mem) if self.mem else None,
            peak_mem_used=self.peak_mem,
            mem_total=self.mem_total,
            energy_j=self.energy,
            peak_power_w=self.power,
            max_temp_c=self.temp,
            util_period_s=self.util_period,
        )


def _max(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


class Summarizer:
    """Running aggregates of ``telemetry`` records (constant memory, however long the run)."""

    def __init__(self) -> None:
        self.gpus: dict[int, _GpuAcc] = {}
        self.samples = 0
        self.first: float | None = None
        self.last: float | None = None
        self.rss: int | None = None
        self.cpu_sum = 0.0
        self.cpu_n = 0
        self.disk_read: int | None = None
        self.disk_write: int | None = None

    def add(self, record: Mapping[str, Any]) -> None:
        self.samples += 1
        t = as_float(record.get("time"))
        if t is not None:
            self.first = t if self.first is None else min(self.first, t)
            self.last = t if self.last is None else max(self.last, t)
        for g in record.get("gpus") or ():
            index = as_int(g.get("index"))
            if index is not None:
                self.gpus.setdefault(index, _GpuAcc(index)).add(g)
        rss = as_int(record.get("rss_bytes"))
        if rss is not None:
            self.rss = rss if self.rss is None else max(self.rss, rss)
        cpu = as_float(record.get("cpu_percent"))
        if cpu is not None:
            self.cpu_sum += cpu
            self.cpu_n += 1
        # Cumulative since the start: the last known values are the run's.
        read, write = as_int(record.get("disk_read_bytes")), as_int(record.get("disk_write_bytes"))
        self.disk_read = read if read is not None else self.disk_read
        self.disk_write = write if write is not None else self.disk_write

    def summary(
        self, *, gpu: bool, reason: str, interval: float | None, errors: int = 0,
        last_error: str = "", torch_memory: Mapping[str, Any] | None = None,
    ) -> MonitorSummary:
        torch_memory = torch_memory or {}
        return MonitorSummary(
            gpu=gpu,
            reason=reason,
            interval=interval,
            samples=self.samples,
            duration_s=(
                self.last - self.first
                if self.first is not None and self.last is not None else None
            ),
            gpus=tuple(self.gpus[i].summary() for i in sorted(self.gpus)),
            peak_rss_bytes=self.rss,
            mean_cpu_percent=self.cpu_sum / self.cpu_n if self.cpu_n else None,
            disk_read_bytes=self.disk_read,
            disk_write_bytes=self.disk_write,
            errors=errors,
            last_error=last_error,
            torch_max_allocated_bytes=as_int(torch_memory.get("max_allocated_bytes")),
            torch_max_reserved_bytes=as_int(torch_memory.get("max_reserved_bytes")),
        )


def summarize_telemetry(
    records: Iterable[Mapping[str, Any]] | RunRecords,
    *,
    start: float | None = None,
    end: float | None = None,
    spans: Sequence[tuple[float, float]] | None = None,
) -> MonitorSummary:
    """Summarise the ``telemetry`` records of a stream; with ``start``/``end`` (UNIX seconds),
    only the samples taken in between, and only the utilisation values whose period lies
    inside one of ``spans`` (default: the whole window; :func:`scored_spans` leaves out the
    gaps between a run's loops). Pure: no NVML, no psutil.

    ``gpu`` and ``reason`` come from the ``monitor`` record (without one: whether any sample
    has GPUs); ``errors`` and torch's peaks (a whole-run figure, not a sample) from the
    ``monitor_summary`` record.
    """
    run = RunRecords.of(records)
    acc = Summarizer()
    monitor = run.monitor
    summary = run.monitor_summary or {}
    errors, last_error = int(summary.get("errors") or 0), str(summary.get("last_error") or "")
    windowed = start is not None or end is not None
    for record in run.telemetry:
        if windowed:
            t = as_float(record.get("time"))
            if t is None or (start is not None and t < start) or (end is not None and t > end):
                continue
        acc.add(record)
    if windowed:
        # A utilisation reading is the mean of the period before it: only periods that lie
        # inside the window describe it (the idle warm-up before it would count otherwise).
        inside = spans if spans is not None else [
            (-math.inf if start is None else start, math.inf if end is None else end)]
        for index, (values, period) in window_utilisation(run.telemetry, inside).items():
            if values or index in acc.gpus:  # a sample can arrive in a record after the window
                gpu_acc = acc.gpus.setdefault(index, _GpuAcc(index))
                gpu_acc.util, gpu_acc.util_period = values, period
    if monitor is not None:
        gpu, reason = bool(monitor.get("gpu")), str(monitor.get("reason") or "")
        interval = as_float(monitor.get("interval"))
    else:
        gpu, reason, interval = bool(acc.gpus), "", None
    torch_memory = {key: summary.get(f"torch_{key}")
                    for key in ("max_allocated_bytes", "max_reserved_bytes")}
    return acc.summary(
        gpu=gpu, reason=reason, interval=interval, errors=errors, last_error=last_error,
        torch_memory=torch_memory,
    )


def window_utilisation(
    telemetry: Iterable[Mapping[str, Any]], spans: Sequence[tuple[float, float]],
) -> dict[int, tuple[list[float], float | None]]:
    """Per GPU, the utilisation values whose whole period lies inside one of ``spans``
    (``(start, end)``, UNIX seconds), and the period (None for readings without driver time
    stamps).

    The driver's own samples (``util_samples``: ``[time, percent]``, ``time`` the end of the
    sample's period) are used where the records hold any: their period is the median gap
    between them, whichever record brought them (a sample ending inside the window can arrive
    with the record after it). Otherwise each record's ``util`` reading counts when
    :data:`MAX_UTIL_PERIOD_S` before it lies inside the window: a conservative bound, since
    the part's period is unknown. A window shorter than a period gets no value: no figure,
    rather than one that is mostly the warm-up."""
    stamped: dict[int, dict[float, float]] = {}
    readings: dict[int, list[tuple[float, float]]] = {}
    for record in telemetry:
        t = as_float(record.get("time"))
        for g in record.get("gpus") or ():
            index = as_int(g.get("index"))
            if index is None:
                continue
            for pair in g.get("util_samples") or ():
                when, value = _stamped(pair)
                if when is not None and value is not None:
                    stamped.setdefault(index, {})[when] = value
            util = as_float(g.get("util"))
            if t is not None and util is not None:
                readings.setdefault(index, []).append((t, util))
    out: dict[int, tuple[list[float], float | None]] = {}
    for index in sorted(set(stamped) | set(readings)):
        samples = stamped.get(index)
        if samples:
            times = sorted(samples)
            gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
            period = gaps[len(gaps) // 2] if gaps else MAX_UTIL_PERIOD_S
            # A thousandth of the period absorbs the stamps' rounding to the microsecond.
            slack = period / 1000.0
            out[index] = ([samples[t] for t in times
                           if _inside(t - period + slack, t - slack, spans)], period)
        else:
            out[index] = ([value for t, value in readings.get(index, ())
                           if _inside(t - MAX_UTIL_PERIOD_S, t, spans)], None)
    return out


def _inside(lo: float, hi: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(start <= lo and hi <= end for start, end in spans)


def _stamped(pair: Any) -> tuple[float | None, float | None]:
    """``[time, percent]`` as numbers; (None, None) for anything else (a stream written by
    someone else)."""
    if isinstance(pair, (list, tuple)) and len(pair) == 2:
        return as_float(pair[0]), as_float(pair[1])
    return None, None


#: A pause between two scored observations shorter than this is part of the run (the timer's
#: read between windows); a longer one (a new loop's set-up, an epoch's loader start, where
#: the GPU idles) splits the scored window's spans for the utilisation.
SPAN_GAP_S = 0.1


# -- the timed window --------------------------------------------------------------------------
def timed_window(
    records: Iterable[Mapping[str, Any]] | RunRecords,
) -> tuple[float, float] | None:
    """(start, end) in UNIX seconds of the scored observations (``rate`` records after the
    warm-up; the warm-up's when there are no others), None without timed observations.

    Why not the warm-up: its first step holds cuDNN's autotuning and the data loader's start
    (13 s of a 13.6 s window for the standard resnet50 on an H200, 2026-11-27, where the GPU
    idles): a GPU load measured over it failed a run whose steps kept the GPU busy."""
    spans = scored_spans(records)  # one reading of the steps' times for both
    return (spans[0][0], max(end for _, end in spans)) if spans else None


def scored_spans(
    records: Iterable[Mapping[str, Any]] | RunRecords,
) -> list[tuple[float, float]]:
    """The scored observations' time as spans (UNIX seconds): those of :func:`timed_window`,
    joined where the pause between two observations is under :data:`SPAN_GAP_S`, so that
    the idle gap before a loop's first step (``loop_start``) or between epochs is not
    counted as the benchmark's GPU load. Read in one pass, keeping only the spans (a run of
    millions of steps has a handful); steps out of time order are sorted first."""
    run = RunRecords.of(records)
    rates = run.steady if len(run.steady) else run.rates  # by column: no record rebuilt

    def steps() -> Iterator[tuple[float, float]]:
        for t, seconds in zip(rates.numbers("time"), rates.numbers("seconds"), strict=True):
            if isinstance(t, (int, float)) and math.isfinite(t):
                yield (t - seconds if isinstance(seconds, (int, float)) and seconds > 0 else t,
                       t)

    spans: list[tuple[float, float]] = []
    last_start = -math.inf
    for start, end in steps():
        if start < last_start:  # out of order: a rare stream, sorted whole
            return _joined(sorted(steps()))
        last_start = start
        _join(spans, start, end)
    return spans


def _joined(steps: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    spans: list[tuple[float, float]] = []
    for start, end in steps:
        _join(spans, start, end)
    return spans


def _join(spans: list[tuple[float, float]], start: float, end: float) -> None:
    if spans and start - spans[-1][1] < SPAN_GAP_S:
        spans[-1] = (spans[-1][0], max(spans[-1][1], end))
    else:
        spans.append((start, end))
