"""The statistical tests of a comparison and their table (:data:`TESTS`: name, description,
function), read by the options, both modes and the reports. Each gives a ratio (above 1 is
faster), its interval at ``1 - 2 alpha`` and one-sided p-values; what they say goes to the
verdict core (results/judge/verdict.py) as an ``Evidence``. The tests, their assumptions and why
each is used: docs/reports.md ("The noise between runs", "Against a git revision"). scipy
and numpy are imported lazily: reading a report without comparing needs neither.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pytest_dlbench.results.judge.verdict import ALPHA

#: The ``quantile`` test's percentile of each side's steady steps pooled over the rounds.
PAIRED_QUANTILE = 75.0

__all__ = ["BETWEEN_RUNS", "BOOTSTRAPS", "PAIRED_QUANTILE", "PAIRED_TESTS", "PERMUTATIONS", "TESTS",
           "PairedStats", "StatTest", "combine_log_ratios", "combined_paired",
           "combined_paired_var", "describe_test", "p_in_direction", "paired_stats",
           "expanded_level", "quantile_stats", "t_test"]

#: Permutations beyond exact enumeration (12 rounds), bootstrap resamples; seeded, reproducible.
PERMUTATIONS = 4096
BOOTSTRAPS = 2000
#: quantile_stats computes its resamples a block at a time where it can (False: one at a time,
#: the reference its tests compare with).
_IN_BLOCKS = True

#: One-sided p-values (that the candidate is lower, that it is higher).
Ps = tuple[float, float]


def p_in_direction(ratio: float, ps: tuple[float | None, float | None] | None) -> float | None:
    """The one-sided p of the change's own direction: what a row reports and the core judges."""
    if ps is None:
        return None
    return ps[0] if ratio < 1 else ps[1]


# -- shared pieces of the tests ---------------------------------------------------------------
def _no_noise(diff: float) -> Ps:
    """The p-values of a difference measured without any noise: certain in its direction; no
    difference at all is no evidence of a change either way."""
    if diff < 0:
        return 0.0, 1.0
    if diff > 0:
        return 1.0, 0.0
    return 1.0, 1.0


def _t_test(mean: float, var_mean: float, df: float, alpha: float) -> tuple[Ps, tuple[float,
                                                                                     float]]:
    """One-sided p-values that a log mean is below / above 0, and its ``1 - 2 alpha`` interval
    as ratios, from a t distribution (``var_mean`` > 0)."""
    from scipy import stats

    se = math.sqrt(var_mean)
    lower = float(stats.t.cdf(mean / se, df))
    half = float(stats.t.ppf(1 - alpha, df)) * se
    return (lower, 1.0 - lower), (math.exp(mean - half), math.exp(mean + half))


def _welch_df(parts: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variances ``(variance, df)``; a
    variance taken as known (df infinite) adds none of its own uncertainty."""
    var = sum(v for v, _ in parts)
    den = sum(v * v / df for v, df in parts if math.isfinite(df) and df > 0)
    return var * var / den if den > 0 else math.inf


def t_test(
    log_ratio: float, parts: Sequence[tuple[float, float]], alpha: float
) -> tuple[Ps, tuple[float, float]]:
    """One-sided p-values and the ``1 - 2 alpha`` interval (as a ratio) of a log ratio whose
    variance is the sum of independent ``(variance, degrees of freedom)`` parts (the sides of
    a saved-baseline comparison, results/judge/noise.py)."""
    var = sum(v for v, _ in parts)
    if var <= 0:
        ratio = math.exp(log_ratio)
        return _no_noise(log_ratio), (ratio, ratio)
    return _t_test(log_ratio, var, _welch_df(parts), alpha)


def combine_log_ratios(
    terms: Sequence[tuple[float, float, Sequence[tuple[float, float]]]], alpha: float = ALPHA
) -> tuple[Ps, tuple[float, float]]:
    """One-sided p-values that a weighted mean of log ratios is below / above 0, and its
    interval as a ratio (:func:`t_test`): ``terms`` are (weight share, log ratio, its
    ``(variance, degrees of freedom)`` parts)."""
    mean = sum(share * diff for share, diff, _ in terms)
    parts = [(share**2 * v, df) for share, _, sides in terms for v, df in sides]
    return t_test(mean, parts, alpha)


# -- matched rounds (--bench-against) ---------------------------------------------------------
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
    #: The smallest p the test can give on these rounds (2**-n for a sign-flip or rank test
    #: of n rounds; 0 for the t-test): evidence combined from these rounds claims no more.
    p_floor: float = 0.0

    @property
    def p(self) -> float | None:
        """The one-sided p-value in the direction of the ratio."""
        return p_in_direction(self.ratio, (self.p_lower, self.p_higher))


def _t_stats(d: Sequence[float], alpha: float) -> PairedStats:
    n = len(d)
    mean = math.fsum(d) / n
    if n < 2:
        return PairedStats(n, math.exp(mean), None, None, None, mean, None)
    var_mean = math.fsum((x - mean) ** 2 for x in d) / (n - 1) / n
    ratio = math.exp(mean)
    if var_mean == 0:
        lower, higher = _no_noise(mean)
        return PairedStats(n, ratio, (ratio, ratio), lower, higher, mean, 0.0)
    (lower, higher), ci = _t_test(mean, var_mean, n - 1, alpha)
    return PairedStats(n, ratio, ci, lower, higher, mean, var_mean)


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
    ps: tuple[float | None, float | None]
    if all(x == 0 for x in d):
        ps = _no_noise(0.0)
    else:
        try:
            lower = float(stats.wilcoxon(d, alternative="less").pvalue)
            ps = lower, 1.0 - lower
        except ValueError:
            ps = None, None
    return PairedStats(
        n, math.exp(estimate),
        (math.exp(ci[0]), math.exp(ci[1])) if ci is not None else None,
        ps[0], ps[1], base.log_mean, base.log_var, p_floor=2.0**-n,
    )


def paired_stats(
    log_ratios: Sequence[float], *, test: str = "t", alpha: float = ALPHA
) -> PairedStats | None:
    """The ratio, interval and p-values of one benchmark's pairs (``"t"`` or ``"wilcoxon"``);
    None without any pair."""
    if test not in PAIRED_TESTS:
        raise ValueError(f"unknown paired test {test!r}: one of {', '.join(PAIRED_TESTS)}")
    if test == "quantile":
        raise ValueError("the quantile test needs the steps of each round: quantile_stats()")
    d = [float(x) for x in log_ratios]
    if not d:
        return None
    return _wilcoxon_stats(d, alpha) if test == "wilcoxon" else _t_stats(d, alpha)


def expanded_level(alpha: float, n: int) -> float:
    """The percentile at which to read a bootstrap over ``n`` rounds for a one-sided level
    ``alpha``: Hesterberg's expanded percentile interval (docs/reports.md, "The interval of the
    quantile test"). A plain percentile interval of few rounds is too narrow (the resampled
    spread is biased low by (n-1)/n and has the normal's tails, not Student's): over 4 rounds
    its 5 % bound is where Student's 0.3 % is, and a real 5 % slowdown read "unchanged" in 7 of
    200 resampled trials at 3 %. Reading it at ``Phi(sqrt(n/(n-1)) * t(alpha, n-1))`` gives the
    small-sample width; as n grows the level returns to alpha."""
    if n < 2:
        return alpha
    from scipy import stats

    return float(stats.norm.cdf(math.sqrt(n / (n - 1)) * stats.t.ppf(alpha, n - 1)))


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
    them at or beyond the observed ratio, one that ties it ordered by the difference of the
    sides' mean log step rates (steps that repeat one value tie the quartiles). The interval
    is the bootstrap's over the rounds (percentiles ``alpha`` and ``1 - alpha``) and gives the
    variance the score combines."""
    import numpy as np

    rounds = [(np.asarray(b, float), np.asarray(c, float))
              for b, c in zip(base, candidate, strict=True) if len(b) and len(c)]
    n = len(rounds)
    if n == 0:
        return None

    def log_ratio(swap: np.ndarray, picks: Sequence[int] | np.ndarray | None = None) -> float:
        chosen = range(n) if picks is None else picks
        b = np.concatenate([rounds[i][1] if swap[i] else rounds[i][0] for i in chosen])
        c = np.concatenate([rounds[i][0] if swap[i] else rounds[i][1] for i in chosen])
        return float(np.log(np.percentile(c, q) / np.percentile(b, q)))

    # Every run the same number of steps (the usual case): the resamples' percentiles computed
    # a block at a time, the same numbers as log_ratio's one at a time, in a fraction of the
    # time (the sequential design judges every look after every round: docs/reports.md).
    same_length = _IN_BLOCKS and len({len(a) for pair in rounds for a in pair}) == 1
    steps = np.stack([np.stack(pair) for pair in rounds]) if same_length else None

    def log_ratios(swaps: np.ndarray, picks: np.ndarray) -> np.ndarray:
        """log_ratio of each row: ``picks[r]`` the rounds chosen, ``swaps[r]`` which sides of
        round i are swapped."""
        if steps is None:
            return np.array([log_ratio(s, p) for s, p in zip(swaps, picks, strict=True)])
        rows, chosen = picks.shape
        block = max(1, 4_000_000 // (chosen * steps.shape[2]))
        out = np.empty(rows)
        for start in range(0, rows, block):
            p = picks[start:start + block]
            swapped = np.take_along_axis(swaps[start:start + block], p, axis=1).astype(int)
            b = steps[p, swapped].reshape(len(p), -1)
            c = steps[p, 1 - swapped].reshape(len(p), -1)
            out[start:start + block] = np.log(np.percentile(c, q, axis=1)
                                              / np.percentile(b, q, axis=1))
        return out

    none = np.zeros(n, bool)
    observed = log_ratio(none)
    if n < 2:
        return PairedStats(n, math.exp(observed), None, None, None, observed, None)
    rng = np.random.default_rng(0)
    if n <= 12:
        signs = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
    else:
        signs = np.vstack([none, rng.integers(0, 2, (PERMUTATIONS - 1, n)).astype(bool)])
    permuted = log_ratios(signs, np.broadcast_to(np.arange(n), signs.shape))
    # Steps that repeat one value (a log timed to the millisecond) leave both quartiles where
    # they were when a few rounds swap: those permutations tie the observed ratio whatever the
    # change, and p could not fall below their share (56/1024 at 10 rounds). A tie is broken by
    # the difference of the sides' mean log step rates, which every swapped round moves: the
    # test's statistic is the pair, ordered by the quartiles' ratio first, so where nothing
    # ties the observed ratio the p-values are the quartiles' alone.
    logs = [(np.log(b).mean(), np.log(c).mean()) for b, c in rounds]
    shift_of = np.array([c - b for b, c in logs])
    shifts = np.where(signs, -shift_of, shift_of).sum(axis=1)
    shift = float(shift_of.sum())
    tie = 1e-12
    tied = np.abs(permuted - observed) <= tie
    lower = float(np.mean((permuted < observed - tie) | (tied & (shifts <= shift + tie))))
    higher = float(np.mean((permuted > observed + tie) | (tied & (shifts >= shift - tie))))
    picks = np.array([rng.integers(0, n, n) for _ in range(BOOTSTRAPS)])  # log_ratio's draws
    boot = log_ratios(np.zeros((BOOTSTRAPS, n), bool), picks)
    level = expanded_level(alpha, n)
    ci = (math.exp(float(np.quantile(boot, level))), math.exp(float(np.quantile(boot, 1 - level))))
    return PairedStats(n, math.exp(observed), ci, lower, higher, observed, float(np.var(boot)),
                       p_floor=1.0 / len(signs))


# -- the table of the tests -------------------------------------------------------------------
@dataclass(frozen=True)
class StatTest:
    """A statistical test of a comparison: its name (``Comparison.test``, ``--bench-paired-test``),
    what the verdict line calls it, the function that runs it, whether it pairs rounds, and the
    ratio it judges: its name in the reports' columns and what it is, one phrase."""

    name: str
    description: str
    function: Callable[..., object]
    paired: bool = True
    ratio: str = "ratio"
    ratio_means: str = ""


#: The test of a saved baseline's comparison (results/judge/noise.py): not a
#: ``--bench-paired-test``.
BETWEEN_RUNS = "between-runs"

TESTS: dict[str, StatTest] = {test.name: test for test in (
    StatTest(BETWEEN_RUNS, "one-sided t-test with the noise between runs", t_test, paired=False,
             ratio="perf ratio", ratio_means="perf / baseline perf, the rates shown"),
    StatTest("t", "one-sided paired t-test on the log ratios of the rounds", paired_stats,
             ratio="geomean ratio", ratio_means="the geometric mean of the rounds' candidate / "
                                                "base rate ratios"),
    StatTest("wilcoxon", "one-sided Wilcoxon signed-rank test on the log ratios of the rounds",
             paired_stats, ratio="HL ratio",
             ratio_means="the Hodges-Lehmann estimate of the rounds' candidate / base rate "
                         "ratios"),
    StatTest("quantile", "upper quartile of each side's steps over the rounds, one-sided "
                         "paired permutation test", quantile_stats, ratio="p75 ratio",
             ratio_means="the candidate's upper quartile (75th percentile) of its steady "
                         "steps' rates over the rounds / the base's, not the ratio of the "
                         "perf shown"),
)}
#: The paired tests ``--bench-paired-test`` may name.
PAIRED_TESTS = tuple(name for name, test in TESTS.items() if test.paired)


def describe_test(name: str, pair_rate: str | None = None) -> str:
    """What the verdict line calls test ``name`` (a paired run of median step rates says so)."""
    found = TESTS.get(name)
    text = found.description if found is not None else name
    if pair_rate == "median":
        text = text.replace("of the rounds", "of the rounds' median step rates")
    return text


# -- the score: benchmarks' log ratios combined -----------------------------------------------
def _shares(terms: Sequence[tuple[float, PairedStats]]) -> list[tuple[float, PairedStats]]:
    """(weight share, statistics) of the weighted benchmarks; empty without any."""
    used = [(w, s) for w, s in terms if w > 0]
    total = sum(w for w, _ in used)
    return [(w / total, s) for w, s in used] if used and total > 0 else []


def combined_paired(
    terms: Sequence[tuple[float, PairedStats]], alpha: float = ALPHA
) -> tuple[float | None, tuple[float, float] | None, Ps | None]:
    """(rate ratio, its interval, one-sided p-values) of the weighted benchmarks' paired
    statistics (a ``--bench-against`` run's score), whatever their test: ranks do not add up
    across benchmarks, mean log ratios and their variances do (:func:`combine_log_ratios`,
    each benchmark's variance with its pairs less one degrees of freedom). A benchmark with one
    pair has no variance: the ratio, but no interval and no p. One weighted benchmark: its own
    ratio, interval and p, so that the score never says more (or less) than its only benchmark's
    rounds (a t-test of a quantile test's rounds was narrower than their permutation p allows,
    and wider than their interval). Several: the p-values are never below the smallest p the
    benchmarks' own tests allow on their rounds (``PairedStats.p_floor``: a t-test on a
    bootstrap's variance would claim what a permutation test of the same rounds cannot)."""
    shares = _shares(terms)
    if not shares:
        return None, None, None
    if len(shares) == 1:
        only = shares[0][1]
        if only.p_lower is None or only.p_higher is None:
            return only.ratio, only.ci, None
        return only.ratio, only.ci, (only.p_lower, only.p_higher)
    ratio = math.exp(sum(share * s.log_mean for share, s in shares))
    if any(s.log_var is None for _, s in shares):
        return ratio, None, None
    ps, ci = combine_log_ratios(
        [(share, s.log_mean, ((s.log_var or 0.0, s.n - 1),)) for share, s in shares], alpha)
    floor = min(s.p_floor for _, s in shares)
    return ratio, ci, (max(ps[0], floor), max(ps[1], floor))


def combined_paired_var(terms: Sequence[tuple[float, PairedStats]]) -> float | None:
    """The variance of the weighted mean log ratio :func:`combined_paired` tests (the score's
    standard error squared; results/judge/verdict.reach asks how far it reaches), None where it
    has no interval."""
    shares = _shares(terms)
    if not shares or any(s.log_var is None for _, s in shares):
        return None
    return sum(share**2 * (s.log_var or 0.0) for share, s in shares)
