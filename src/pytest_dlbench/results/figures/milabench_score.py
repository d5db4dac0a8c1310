"""milabench's score of a run (``--bench-score=milabench``), beside the seed's.

The seed's score (results/figures/scoring.py) is milarun's: ``perf_adj = perf × (1 − std%) × (1 −
fail/n)`` and the weighted geometric mean of ``perf_adj``. milabench's current score is another
quantity, computed here as milabench's source computes it (read at commit
:data:`MILABENCH_COMMIT`, docs/figures.md "milabench's score"):

- a benchmark's figure (``milabench/report/__init__.py``, ``_make_row``): the sum over the
  devices of the node of each device's mean rate, times ``1 − fail / max(n, 1)``; a device's mean
  rate is milabench's ``_metrics`` mean (``milabench/summary.py``): its rates sorted, the lowest
  and the highest dropped from 5 values on, averaged;
- the suite's (``make_report``'s ``_score``): ``exp(Σ w·log(figure + 1) / Σ w)``, ``w`` the
  weight of an enabled benchmark, a benchmark with no figure (it did not run, or failed every
  run) counted as 0; the weights are the whole suite's (``milabench/config/__init__.py``: the
  configuration before ``--select``), so a weighted benchmark a subset left out counts as 0 too
  (the manifest's ``suite_weights``).

What the project's run data changes: a device's rates are the per-step rates of the steady
windows of its successful runs (milabench pools every rate voir reported, of failed runs too);
a failed run counts in ``fail`` as in milabench.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # options.py reads the score names at start-up: no summary imported then
    from pytest_dlbench.results.model.summary import BenchSummary, MilabenchScore, SuiteSummary

__all__ = [
    "MILABENCH",
    "MILABENCH_COMMIT",
    "MILARUN",
    "SCORES",
    "bench_figure",
    "counted_as_zero",
    "milabench_score",
    "suite_score",
    "trimmed_mean",
    "with_milabench_score",
]

#: The milabench commit whose source these formulas follow.
MILABENCH_COMMIT = "faf39234e7ff35b45a49faa09c66383519f6ec55"
#: ``--bench-score`` values: the seed's score alone (milarun's perf_adj), or milabench's beside it.
MILARUN = "milarun"
MILABENCH = "milabench"
SCORES = (MILARUN, MILABENCH)
#: From this many values on, milabench drops the lowest and the highest before averaging.
TRIM_FROM = 5


def trimmed_mean(values: Iterable[float]) -> float | None:
    """milabench's mean of a list of rates: sorted, the lowest and the highest dropped when
    there are :data:`TRIM_FROM` or more, averaged; None for none."""
    xs = sorted(float(v) for v in values if math.isfinite(v))
    if len(xs) >= TRIM_FROM:
        xs = xs[1:-1]
    return statistics.fmean(xs) if xs else None


def _device_rates(bench: BenchSummary) -> dict[int, list[float]]:
    """Each device's per-step rates: the steady steps of its successful runs, pooled."""
    rates: dict[int, list[float]] = {}
    for run in bench.runs:
        if run.ok:
            rates.setdefault(run.device, []).extend(v for _, v in run.steady)
    return rates


def bench_figure(bench: BenchSummary) -> float | None:
    """milabench's score of one benchmark (its report's ``score`` column): Σ over devices of
    their trimmed mean rates, times ``1 − fail / max(n, 1)``; None without a successful run's
    rate (the suite counts it as 0)."""
    rates = _device_rates(bench)
    means = [m for m in map(trimmed_mean, rates.values()) if m is not None]
    if not means:
        return None
    total = math.fsum(means)
    if total <= 0:  # milabench then takes the benchmark's rate over every device
        total = trimmed_mean(v for values in rates.values() for v in values) or 0.0
    return total * (1 - bench.fail / max(bench.n, 1))


def suite_score(figures: Sequence[tuple[float | None, float, bool]]) -> float | None:
    """``exp(Σ w·log(figure + 1) / Σ w)`` over (figure, weight, enabled); a missing figure is 0,
    a disabled benchmark weighs 0. None when nothing weighs."""
    weights = [w if enabled else 0.0 for _, w, enabled in figures]
    total = math.fsum(weights)
    if total <= 0:
        return None
    logs = math.fsum(w * math.log((f or 0.0) + 1) for (f, _, _), w in zip(figures, weights,
                                                                          strict=True))
    return math.exp(logs / total)


def milabench_score(summary: SuiteSummary,
                    suite_weights: Mapping[str, float] | None = None) -> MilabenchScore:
    """milabench's score of each benchmark of ``summary`` and the suite's score;
    ``suite_weights``: the weight of every weighted benchmark of the suite (the manifest's),
    those this run did not select counted as 0."""
    figures = {b.name: bench_figure(b) for b in summary.benchmarks}
    left_out = {name: float(w) for name, w in (suite_weights or {}).items()
                if name not in figures and w > 0}
    score = suite_score([*((figures[b.name], b.weight, b.enabled) for b in summary.benchmarks),
                         *((None, w, True) for w in left_out.values())])
    from pytest_dlbench.results.model.summary import MilabenchScore

    return MilabenchScore(score, figures, left_out)


def counted_as_zero(summary: SuiteSummary) -> list[str]:
    """The weighted, enabled benchmarks this run selected whose milabench figure is missing (no
    run, or every run failed): milabench's score counts each as 0 (and those not selected:
    ``summary.milabench.left_out``)."""
    if summary.milabench is None:
        return []
    return [b.name for b in summary.benchmarks if b.enabled and b.weight > 0
            and summary.milabench.benchmarks.get(b.name) is None]


def with_milabench_score(summary: SuiteSummary,
                         suite_weights: Mapping[str, float] | None = None) -> SuiteSummary:
    """``summary`` with its milabench score (the seed's ``score`` unchanged)."""
    return replace(summary, milabench=milabench_score(summary, suite_weights))
