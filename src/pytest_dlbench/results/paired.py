"""Paired comparison of two sides measured in the same job (``--bench-against``).

The base revision and the candidate (the working tree) ran each benchmark in alternating order
over ``rounds`` (ABBA: base-candidate, then candidate-base, ...), on the same device slot. Round
``r`` of a benchmark on device ``k`` is one **pair**: the base run ``<bench>.D<k>.R<r>`` in
``base/`` and the candidate run of the same name in the run directory, measured minutes or
seconds apart instead of days. Each pair gives one log ratio ``d = ln(candidate rate / base
rate)``; what the machine's load did to that round hits both of its runs, and drops out of d.

Per benchmark:

- ``ratio = exp(mean d)``, the geometric mean of the pairs' rate ratios (above 1 is faster);
- the one-sided test of the pairs (``test``):

  * ``"t"`` (the default): the paired t-test on the log ratios. It uses magnitudes (a consistent
    5 % drop is significant with few rounds, where a rank test cannot be: the one-sided exact
    Wilcoxon p-value cannot go below ``2**-n``, 0.0625 with 4 rounds), its interval is the
    ratio's confidence interval, and it combines across benchmarks for the score. Log ratios
    make it scale-free and symmetric (x 0.9 and x 1/0.9 are the same size) and, being means of
    hundreds of steps, they are close to normal;
  * ``"wilcoxon"``: the signed-rank test on the same log ratios, with the Hodges-Lehmann
    estimate (median of the Walsh averages) as the ratio and its distribution-free interval.
    One round disturbed by a burst of load weighs as one rank, not by its size: more robust
    on a noisy runner, at the price of needing more rounds (5 at least, 6 to tolerate one
    wrong-signed pair);

  * ``"quantile"``: the ratio of the sides' upper quartiles of their steps pooled over the
    rounds, with a paired permutation test and a bootstrap interval (:func:`quantile_stats`):
    made for a machine whose load comes in bursts that slow whole runs;

- the interval is two-sided at ``1 - 2 alpha`` (90 % for alpha 0.05), so that its upper end is
  below 1 exactly when the one-sided test says the candidate is slower (and its lower end above
  1 exactly when it is faster);
- the verdict is the one of :mod:`.compare`: **regressed** when ``ratio < 1 - tolerance`` and
  the test is significant (p < alpha), **improved** in the mirror case, else **unchanged**.
  Rounds where either side failed are left out of the pairs; the candidate's failures fail the
  run (exit status 1), the base side's are listed.

The score: the weighted mean of the benchmarks' mean log ratios, whose variance is the weighted
sum of their variances of the mean (the same delta-method combination as :mod:`.compare`, with
Welch-Satterthwaite degrees of freedom), gives the score's rate ratio, its interval and its
p-value, whatever the per-benchmark test (ranks do not add up across benchmarks). The score
regresses on the same rule as in :mod:`.compare`. ``score_ratio`` stays the ratio of the two
sides' perf_adj scores (seed 001), shown beside.

Pure functions over two :class:`~.scoring.SuiteSummary` (no pytest, no git): ``dlbench report``
recomputes the same verdicts from a finished run directory.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any

from pytest_dlbench.results.compare import (
    FAILED,
    IMPROVED,
    INCOMPARABLE,
    REGRESSED,
    UNCHANGED,
    BenchComparison,
    Comparison,
    check_levels,
    score_verdict,
)
from pytest_dlbench.results.gate import (
    ALPHA,
    PAIRED_QUANTILE,
    PAIRED_RATE,
    PAIRED_RATES,
    PAIRED_TEST,
    PAIRED_TESTS,
    TOLERANCE,
)
from pytest_dlbench.results.scoring import (
    TOTAL_TIME,
    BenchSummary,
    SuiteSummary,
    weighted_geomean,
)

__all__ = [
    "Pair",
    "PairedStats",
    "compare_paired",
    "paired_stats",
    "pairs_of",
    "quantile_stats",
    "summarize_paired_dir",
]


@dataclass(frozen=True)
class Pair:
    """One round of one benchmark on one device: both sides' rates."""

    device: int
    round: int
    base: float
    candidate: float

    @property
    def log_ratio(self) -> float:
        return math.log(self.candidate / self.base)


@dataclass(frozen=True)
class PairedStats:
    """What the pairs of one benchmark say: the ratio, its interval, the one-sided p-values."""

    n: int
    ratio: float
    ci: tuple[float, float] | None
    p_lower: float | None  # that the candidate is slower
    p_higher: float | None  # that it is faster
    log_mean: float  # mean log ratio (the score combines these)
    log_var: float | None  # variance of that mean, None with one pair


def pairs_of(
    base: BenchSummary | None, candidate: BenchSummary | None, rate: str = PAIRED_RATE
) -> list[Pair]:
    """The rounds where both sides succeeded, matched by (device, repeat). ``rate`` is what a
    run contributes: ``window`` (its scored rate) or ``median`` (its median step rate)."""
    if rate not in PAIRED_RATES:
        raise ValueError(f"unknown paired rate {rate!r}: one of {', '.join(PAIRED_RATES)}")
    if base is None or candidate is None:
        return []

    def figure(run: Any) -> float | None:
        return run.median_rate if rate == "median" else run.rate

    def rates(bench: BenchSummary) -> dict[tuple[int, int], float]:
        figures = {(r.device, r.repeat or 0): figure(r) for r in bench.runs if r.ok}
        return {key: float(v) for key, v in figures.items() if v is not None and v > 0}

    b, c = rates(base), rates(candidate)
    return [Pair(device, rnd, b[(device, rnd)], c[(device, rnd)])
            for device, rnd in sorted(b.keys() & c.keys())]


# -- the tests --------------------------------------------------------------------------------
def _t_stats(d: Sequence[float], alpha: float) -> PairedStats:
    from scipy import stats

    n = len(d)
    mean = math.fsum(d) / n
    if n < 2:
        return PairedStats(n, math.exp(mean), None, None, None, mean, None)
    var = math.fsum((x - mean) ** 2 for x in d) / (n - 1)
    var_mean = var / n
    if var_mean == 0:
        lower = 0.0 if mean < 0 else (1.0 if mean > 0 else 0.5)
        ratio = math.exp(mean)
        return PairedStats(n, ratio, (ratio, ratio), lower, 1.0 - lower, mean, 0.0)
    se = math.sqrt(var_mean)
    lower = float(stats.t.cdf(mean / se, n - 1))
    half = float(stats.t.ppf(1 - alpha, n - 1)) * se
    ci = (math.exp(mean - half), math.exp(mean + half))
    return PairedStats(n, math.exp(mean), ci, lower, 1.0 - lower, mean, var_mean)


def _signed_rank_counts(n: int) -> list[int]:
    """How many of the 2**n sign patterns give each rank sum W+ = 0 .. n(n+1)/2."""
    counts = [1]
    for k in range(1, n + 1):
        grown = counts + [0] * k
        for w, c in enumerate(counts):
            grown[w + k] += c
        counts = grown
    return counts


def _hodges_lehmann(d: Sequence[float], alpha: float) -> tuple[float, tuple[float, float] | None]:
    """The median of the Walsh averages and its distribution-free ``1 - 2 alpha`` interval
    (None when n is too small for one: 2**-n > alpha)."""
    n = len(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    estimate = statistics.median(walsh)
    counts = _signed_rank_counts(n)
    total = 2**n
    # k: the largest number of Walsh averages cut from each end with P(W+ < k) <= alpha.
    k, cumulative = 0, 0
    while k < len(counts) and (cumulative + counts[k]) / total <= alpha:
        cumulative += counts[k]
        k += 1
    if k == 0:
        return estimate, None
    return estimate, (walsh[k - 1], walsh[len(walsh) - k])


def _wilcoxon_stats(d: Sequence[float], alpha: float) -> PairedStats:
    from scipy import stats

    base = _t_stats(d, alpha)  # the score combines mean log ratios and their variances
    n = len(d)
    if n < 2:
        return base
    estimate, ci = _hodges_lehmann(d, alpha)
    if all(x == 0 for x in d):
        lower: float | None = 0.5
    else:
        try:
            lower = float(stats.wilcoxon(d, alternative="less").pvalue)
        except ValueError:
            lower = None
    return PairedStats(
        n, math.exp(estimate),
        (math.exp(ci[0]), math.exp(ci[1])) if ci is not None else None,
        lower, None if lower is None else 1.0 - lower, base.log_mean, base.log_var,
    )


#: Sign patterns tried by the permutation test beyond exact enumeration (2**12 rounds' worth),
#: and resamples of the bootstrap interval; both seeded, so a verdict is reproducible.
PERMUTATIONS = 4096
BOOTSTRAPS = 2000


def quantile_stats(
    base: Sequence[Sequence[float]], candidate: Sequence[Sequence[float]], *,
    alpha: float = ALPHA, q: float = PAIRED_QUANTILE,
) -> PairedStats | None:
    """The ``quantile`` test of matched rounds: ``base[i]`` and ``candidate[i]`` hold the step
    rates of round i's two runs.

    The ratio is the ``q``-th percentile of the candidate's steps pooled over the rounds over
    the base's. On a machine whose load comes and goes in bursts of seconds, a run's steps mix
    full-speed steps and slowed ones, and a whole run can be slowed; the upper quartile of all
    of a side's steps is its full speed as long as a quarter of them got it, where a run's mean
    or median is moved by the burst that hit it and not its partner.

    The p-values come from a paired permutation test: under "no difference" the two runs of a
    round are exchangeable, so the ratio is recomputed with the sides swapped in every subset
    of the rounds (all 2**n up to 12 rounds, else PERMUTATIONS random ones); p is the share of
    them at or beyond the observed ratio. The interval is the bootstrap's over the rounds
    (percentiles ``alpha`` and ``1 - alpha``) and gives the variance the score combines."""
    import numpy as np

    rounds = [(np.asarray(b, float), np.asarray(c, float))
              for b, c in zip(base, candidate, strict=True) if len(b) and len(c)]
    n = len(rounds)
    if n == 0:
        return None

    def log_ratio(swap: np.ndarray, picks: Sequence[int] | None = None) -> float:
        chosen = range(n) if picks is None else picks
        b = np.concatenate([rounds[i][1] if swap[i] else rounds[i][0] for i in chosen])
        c = np.concatenate([rounds[i][0] if swap[i] else rounds[i][1] for i in chosen])
        return float(np.log(np.percentile(c, q) / np.percentile(b, q)))

    none = np.zeros(n, bool)
    observed = log_ratio(none)
    if n < 2:
        return PairedStats(n, math.exp(observed), None, None, None, observed, None)
    rng = np.random.default_rng(0)
    if n <= 12:
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    else:
        signs = np.vstack([none, rng.integers(0, 2, (PERMUTATIONS - 1, n)).astype(bool)])
    permuted = np.array([log_ratio(s) for s in signs])
    tie = 1e-12
    lower = float(np.mean(permuted <= observed + tie))
    higher = float(np.mean(permuted >= observed - tie))
    boot = np.array([log_ratio(none, rng.integers(0, n, n)) for _ in range(BOOTSTRAPS)])
    ci = (math.exp(float(np.quantile(boot, alpha))), math.exp(float(np.quantile(boot, 1 - alpha))))
    return PairedStats(n, math.exp(observed), ci, lower, higher, observed, float(np.var(boot)))


def paired_stats(
    log_ratios: Sequence[float], *, test: str = "t", alpha: float = ALPHA
) -> PairedStats | None:
    """The ratio, interval and p-values of one benchmark's pairs; None without any pair."""
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown paired test {test!r}: one of {', '.join(PAIRED_TESTS)}")
    if test == "quantile":
        raise ValueError("the quantile test needs the steps of each round: quantile_stats()")
    d = [float(x) for x in log_ratios]
    if not d:
        return None
    return _wilcoxon_stats(d, alpha) if test == "wilcoxon" else _t_stats(d, alpha)


def _verdict(s: PairedStats, tolerance: float, alpha: float) -> str:
    if s.p_lower is not None and s.ratio < 1 - tolerance and s.p_lower < alpha:
        return REGRESSED
    if s.p_higher is not None and s.ratio > 1 + tolerance and s.p_higher < alpha:
        return IMPROVED
    return UNCHANGED


# -- a whole run ------------------------------------------------------------------------------
def _adj(bench: BenchSummary | None) -> float:
    return bench.perf_adj if bench is not None else 0.0


def _compare_bench(
    name: str, base: BenchSummary | None, cand: BenchSummary, *, tolerance: float, alpha: float,
    test: str, rate: str,
) -> tuple[BenchComparison, PairedStats | None]:
    pairs = pairs_of(base, cand, rate)
    if test == "quantile":
        steps = _round_steps(base, cand, pairs)
        s = quantile_stats(*steps, alpha=alpha) if pairs else None
    else:
        s = paired_stats([p.log_ratio for p in pairs], test=test, alpha=alpha)
    cur_adj, base_adj = _adj(cand), _adj(base)
    note = ""
    if s is None:
        ratio: float | None
        if not cand.rates:
            verdict, ratio = FAILED, 0.0
        else:
            verdict, ratio = INCOMPARABLE, None
            note = "no base run succeeded" if base is not None and base.n else "no base run"
        p = None
    else:
        ratio = s.ratio
        verdict = _verdict(s, tolerance, alpha)
        p = s.p_lower if s.ratio < 1 else s.p_higher
        if s.n < 2:
            note = "one pair: no test (--bench-rounds 2 or more)"
    comparison = BenchComparison(
        name=name,
        units=cand.units,
        weight=cand.weight,
        current=cand.perf or 0.0,
        baseline=(base.perf or 0.0) if base is not None else 0.0,
        ratio=ratio,
        verdict=verdict,
        p_value=p,
        samples=(len(pairs), len(pairs)),
        current_adj=cur_adj,
        baseline_adj=base_adj,
        adj_ratio=cur_adj / base_adj if cur_adj > 0 and base_adj > 0 else None,
        ci=s.ci if s is not None else None,
        note=note,
    )
    return comparison, s


def _round_steps(
    base: BenchSummary | None, cand: BenchSummary, pairs: Sequence[Pair]
) -> tuple[list[list[float]], list[list[float]]]:
    """The steady step rates of both runs of each pair (a time-to-train run: its rate)."""

    def steps(bench: BenchSummary | None) -> dict[tuple[int, int], list[float]]:
        out: dict[tuple[int, int], list[float]] = {}
        for r in bench.runs if bench is not None else ():
            if r.ok:
                timed = r.metric == TOTAL_TIME or not r.steady
                out[(r.device, r.repeat or 0)] = ([float(r.rate or 0.0)] if timed
                                                  else [v for _, v in r.steady])
        return out

    b, c = steps(base), steps(cand)
    keys = [(p.device, p.round) for p in pairs]
    return [b[k] for k in keys], [c[k] for k in keys]


def _score_stats(
    terms: Sequence[tuple[float, PairedStats]], alpha: float
) -> tuple[float | None, tuple[float, float] | None, float | None]:
    """(rate ratio, interval, one-sided p that it is lower) of the weighted benchmarks."""
    used = [(w, s) for w, s in terms if w > 0]
    total = sum(w for w, _ in used)
    if not used or total <= 0:
        return None, None, None
    mean = sum(w / total * s.log_mean for w, s in used)
    ratio = math.exp(mean)
    if any(s.log_var is None for _, s in used):
        return ratio, None, None  # a benchmark with one pair: no variance to combine
    parts = [((w / total) ** 2 * s.log_var, s.n) for w, s in used]  # type: ignore[operator]
    var = sum(v for v, _ in parts)
    if var == 0:
        lower = 0.0 if mean < 0 else (1.0 if mean > 0 else 0.5)
        return ratio, (ratio, ratio), lower
    from scipy import stats

    df_den = sum(v * v / (n - 1) for v, n in parts)
    df = var * var / df_den if df_den > 0 else math.inf
    se = math.sqrt(var)
    half = float(stats.t.ppf(1 - alpha, df)) * se
    return ratio, (math.exp(mean - half), math.exp(mean + half)), float(stats.t.cdf(mean / se, df))


def compare_paired(
    candidate: SuiteSummary,
    base: SuiteSummary,
    *,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
    test: str = PAIRED_TEST,
    rate: str = PAIRED_RATE,
    against: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
) -> Comparison:
    """The paired verdicts of a ``--bench-against`` run: ``candidate`` (the run directory) and
    ``base`` (its ``base/`` folder), each benchmark's runs paired by device and round.

    A benchmark the candidate ran and the base did not (not in the suite at the base revision)
    is in ``only_current``, with no verdict; the reverse is in ``only_baseline``."""
    check_levels(tolerance, alpha)
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown paired test {test!r}: one of {', '.join(PAIRED_TESTS)}")
    if rate not in PAIRED_RATES:
        raise ValueError(f"unknown paired rate {rate!r}: one of {', '.join(PAIRED_RATES)}")
    base_names = {b.name for b in base.benchmarks if b.n}
    benches: list[BenchComparison] = []
    terms: list[tuple[float, PairedStats]] = []
    only_current: list[str] = []
    for cand in candidate.benchmarks:
        if cand.n == 0:
            continue  # selected but never ran (interrupted): the summary says so
        if cand.name not in base_names:
            only_current.append(cand.name)
            continue
        b, s = _compare_bench(cand.name, base.get(cand.name), cand, tolerance=tolerance,
                              alpha=alpha, test=test, rate=rate)
        benches.append(b)
        base_bench = base.get(cand.name)
        if s is not None and cand.scored and base_bench is not None and base_bench.scored:
            terms.append((cand.weight, s))
    cand_names = {b.name for b in candidate.benchmarks if b.n}
    only_baseline = tuple(n for n in sorted(base_names) if n not in cand_names)
    rate_ratio, score_ci, score_p = _score_stats(terms, alpha)
    verdict = score_verdict(rate_ratio, benches, score_p, tolerance, alpha)
    if score_p is not None and rate_ratio is not None and rate_ratio > 1:
        score_p = 1 - score_p  # in the direction of the change, like the benchmarks'
    scored = {b.name for b in benches if b.adj_ratio and b.weight > 0}
    score_ratio = weighted_geomean(
        (b.adj_ratio or 0.0, b.weight) for b in benches if b.name in scored
    )
    return Comparison(
        benchmarks=tuple(benches),
        only_current=tuple(only_current),
        only_baseline=only_baseline,
        current_score=candidate.score,
        baseline_score=base.score,
        score_ratio=score_ratio,
        score_verdict=verdict,
        score_p_value=score_p,
        tolerance=tolerance,
        alpha=alpha,
        warnings=tuple(warnings),
        score_rate_ratio=rate_ratio,
        score_ci=score_ci,
        test=test,
        pair_rate=rate,
        against=dict(against) if against is not None else None,
    )


def summarize_paired_dir(
    run_dir: str | PathLike[str],
    *,
    tolerance: float = TOLERANCE,
    alpha: float = ALPHA,
    test: str | None = None,
    rate: str | None = None,
) -> tuple[SuiteSummary, SuiteSummary, Comparison] | None:
    """(candidate summary, base summary, paired comparison) of a ``--bench-against`` run
    directory, None when it is not one. ``test`` and ``rate`` default to the run's."""
    from pytest_dlbench.results.scoring import summarize_dir
    from pytest_dlbench.run import layout

    against = layout.read_against(run_dir)
    if against is None:
        return None
    base_dir = layout.base_dir(run_dir)
    candidate = summarize_dir(run_dir)
    base = summarize_dir(base_dir) if base_dir.is_dir() else SuiteSummary((), None, (), 0.0)
    comparison = compare_paired(
        candidate, base, tolerance=tolerance, alpha=alpha,
        test=test or str(against.get("test") or PAIRED_TEST),
        rate=rate or str(against.get("rate") or PAIRED_RATE), against=against,
        warnings=tuple(str(w) for w in against.get("warnings") or ()),
    )
    return candidate, base, comparison
