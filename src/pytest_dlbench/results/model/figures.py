"""Each figure of a benchmark, declared once (docs/reports.md, "The figures"): its column name,
its machine name, its unit, how the reports write it, where it comes from, when a report shows
it, and how to read it from a :class:`~pytest_dlbench.results.model.summary.BenchSummary`.

Every output reads this list: the terminal table and ``dlbench report`` (report/terminal.py),
the single-run HTML page (report/html.py), ``frame()`` (results/history/frames.py) and the
loggers (loggers/source.py: MLflow and W&B). A new figure is one entry here, and the test of
the outputs (tests/report/test_figures.py) fails until every output shows it.

Plain data: no formatting here (the reports own their notation), no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_dlbench.results.model.summary import BenchSummary

__all__ = ["FIGURES", "Figure", "figure", "shown_figures"]

#: The tables a figure is in: the compact table, the ``-v`` columns, the second table (what
#: only some benchmarks have) and the lines under the tables (flags, said in words).
MAIN, VERBOSE, DETAILS, LINES = "main", "verbose", "details", "lines"

#: How the reports write a figure (each report maps these to its own notation).
FORMATS = ("rate", "percent", "weight", "count", "text", "tflops", "mfu", "seconds", "bytes",
           "energy", "flag")


def _always(benches: Sequence[BenchSummary]) -> bool:
    return True


@dataclass(frozen=True)
class Figure:
    """One figure of a benchmark.

    ``column``: its header in the terminal and HTML tables; ``key``: its name in ``frame()``
    and the loggers (a metric, or a tag for a text); ``unit``: the unit of :meth:`value`
    (``units``: the benchmark's own, items/s...); ``fmt``: how the reports write it
    (:data:`FORMATS`); ``table``: where the terminal shows it; ``source``: where it comes from,
    in words (the docs' list); ``shown``: whether a report's table has the column, given the
    run's benchmarks (a run without telemetry has no memory columns)."""

    column: str
    key: str
    unit: str
    fmt: str
    table: str
    source: str
    read: Callable[[BenchSummary], Any]
    shown: Callable[[Sequence[BenchSummary]], bool] = _always
    #: its name as a logger metric when not ``key`` (the memory figures keep their names).
    metric_name: str | None = None

    def value(self, bench: BenchSummary) -> Any:
        """Its value for ``bench``, in :attr:`unit` (None: not known)."""
        return self.read(bench)

    @property
    def metric(self) -> str:
        """Its name where the loggers send it."""
        return self.metric_name or self.key

    @property
    def is_text(self) -> bool:
        """A text (sent as a tag), not a number or a flag (sent as a metric)."""
        return self.fmt == "text"


# -- when a report shows a column: only when some benchmark recorded it ---------------------
def _has_flops(benches: Sequence[BenchSummary]) -> bool:
    """Achieved TFLOP/s and MFU only when some benchmark's FLOPs were counted (a benchmark
    measured in TFLOP/s has them as its perf)."""
    return any((b.tflops is not None or b.mfu_error) and b.units != "TFLOP/s" for b in benches)


def _has_precision(benches: Sequence[BenchSummary]) -> bool:
    return any(b.precision for b in benches)


def _has_time_to_train(benches: Sequence[BenchSummary]) -> bool:
    return any(b.lower_is_better for b in benches)


def _stats(benches: Sequence[BenchSummary]) -> list[dict[str, Any]]:
    return [b.telemetry for b in benches]


def _has_torch_peaks(benches: Sequence[BenchSummary]) -> bool:
    return any(t.get("torch_max_reserved_bytes") is not None for t in _stats(benches))


def _has_memory(benches: Sequence[BenchSummary]) -> bool:
    """Streams from older runs have no telemetry: no memory columns then."""
    return _has_torch_peaks(benches) or any(
        t.get("peak_rss_bytes") or t.get("peak_gpu_mem_bytes") for t in _stats(benches))


def _on_gpu(benches: Sequence[BenchSummary]) -> bool:
    return any(t.get("peak_gpu_mem_bytes") for t in _stats(benches))


def _has_nvml_peak(benches: Sequence[BenchSummary]) -> bool:
    return _has_memory(benches) and _on_gpu(benches)


def _has_peak_rss(benches: Sequence[BenchSummary]) -> bool:
    """On a CPU run the process tree's resident memory (torch's included) stands where a GPU
    run's device peak does: one memory column or the other."""
    return _has_memory(benches) and not _on_gpu(benches)


def _has_energy(benches: Sequence[BenchSummary]) -> bool:
    return _has_memory(benches) and any(t.get("energy_j") is not None for t in _stats(benches))


def _has_busy(benches: Sequence[BenchSummary]) -> bool:
    return any(b.telemetry.get("busy") for b in benches)


def _has_unreliable(benches: Sequence[BenchSummary]) -> bool:
    return any(b.unreliable for b in benches)


def _telemetry(key: str) -> Callable[[BenchSummary], Any]:
    return lambda b: b.telemetry.get(key)


def _time_to_train(b: BenchSummary) -> float | None:
    return b.total_time_secs if b.lower_is_better else None


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def _busy(b: BenchSummary) -> bool | None:
    busy = b.telemetry.get("busy")
    return None if busy is None else bool(busy)


#: Every figure of a benchmark, in the terminal's order (the compact table's, then ``-v``'s,
#: then the second table's, then the lines'). The compile columns are the compiled table's
#: (results/figures/compiled.py, docs/compile.md), not a benchmark's own figures.
FIGURES: tuple[Figure, ...] = (
    Figure("perf", "perf", "units", "rate", MAIN,
           "the mean steady-state rate of the successful runs, per device",
           lambda b: b.perf),
    Figure("units", "units", "", "text", MAIN, "the benchmark's unit of work per second",
           lambda b: b.units),
    Figure("std%", "std_pct", "%", "percent", MAIN,
           "std over perf, over the runs' rates or over blocks of one run's window",
           lambda b: _percent(b.std_pct)),
    Figure("perf_adj", "perf_adj", "units", "rate", MAIN,
           "perf, less its noise (std%, capped) and its failures", lambda b: b.perf_adj),
    Figure("weight", "weight", "", "weight", MAIN, "the benchmark's weight in the score",
           lambda b: b.weight),
    Figure("n", "n", "runs", "count", VERBOSE, "the runs of the benchmark", lambda b: b.n),
    Figure("fail", "fail", "runs", "count", VERBOSE, "the runs that failed", lambda b: b.fail),
    Figure("total", "total", "units", "rate", VERBOSE,
           "the whole node at once: the devices' rates summed", lambda b: b.total),
    Figure("TFLOP/s", "tflops", "TFLOP/s", "tflops", DETAILS,
           "achieved TFLOP/s per device: perf x the FLOPs counted per item",
           lambda b: b.tflops, _has_flops),
    Figure("MFU", "mfu", "%", "mfu", DETAILS,
           "TFLOP/s over the device's peak (a datasheet's, or a matmul benchmark's); "
           "its reason when there is none", lambda b: _percent(b.mfu), _has_flops),
    Figure("precision", "precision", "", "text", DETAILS,
           "the precision preset the runs recorded", lambda b: b.precision, _has_precision),
    Figure("total_time_secs", "total_time_secs", "s", "seconds", DETAILS,
           "time-to-train (lower is better): the steps' seconds summed, the first skipped",
           _time_to_train, _has_time_to_train),
    Figure("nvml peak", "peak_gpu_mem_bytes", "bytes", "bytes", DETAILS,
           "the device's peak memory, sampled through NVML (the largest run's)",
           _telemetry("peak_gpu_mem_bytes"), _has_nvml_peak,
           metric_name="bench_peak_gpu_mem_bytes"),
    Figure("peak rss", "peak_rss_bytes", "bytes", "bytes", DETAILS,
           "the process tree's peak resident memory (the largest run's)",
           _telemetry("peak_rss_bytes"), _has_peak_rss, metric_name="bench_peak_rss_bytes"),
    Figure("torch alloc", "torch_max_allocated_bytes", "bytes", "bytes", DETAILS,
           "torch's peak allocated memory (torch.cuda.max_memory_allocated)",
           _telemetry("torch_max_allocated_bytes"), _has_torch_peaks,
           metric_name="bench_torch_max_allocated_bytes"),
    Figure("torch reserved", "torch_max_reserved_bytes", "bytes", "bytes", DETAILS,
           "torch's peak reserved memory (torch.cuda.max_memory_reserved)",
           _telemetry("torch_max_reserved_bytes"), _has_torch_peaks,
           metric_name="bench_torch_max_reserved_bytes"),
    Figure("energy", "energy_j", "J", "energy", DETAILS,
           "the devices' energy over every run, from NVML", _telemetry("energy_j"),
           _has_energy, metric_name="bench_energy_j"),
    Figure("busy", "busy", "", "flag", LINES,
           "some runs were taken while other processes used the CPU", _busy, _has_busy),
    Figure("unreliable", "unreliable", "", "flag", LINES,
           "the figure cannot be trusted (std% too large, too few observations); its reason",
           lambda b: bool(b.unreliable), _has_unreliable),
)


def figure(column_or_key: str) -> Figure:
    """The figure of that column header or key."""
    for f in FIGURES:
        if column_or_key in (f.column, f.key):
            return f
    raise KeyError(column_or_key)


def shown_figures(benches: Sequence[BenchSummary], *tables: str) -> list[Figure]:
    """The figures of ``tables`` (all when none named) that a report of ``benches`` shows."""
    return [f for f in FIGURES if (not tables or f.table in tables) and f.shown(benches)]
