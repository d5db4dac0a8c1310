"""A saved baseline's evidence: each side's figure, ``ln(perf)``, with its noise between runs and
the drift between sessions, tested by results/judge/stats.t_test, and the doubts (an unreliable
std%, a busy machine) that keep a change beyond the tolerance from being claimed. The model,
its defaults and what they were measured on: docs/reports.md, "The noise between runs" and
"The drift between sessions". The verdict is the core's (results/judge/verdict.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_dlbench.core.numbers import MAX_FIGURE
from pytest_dlbench.results.figures.busy import busy_share
from pytest_dlbench.results.judge import verdict
from pytest_dlbench.results.judge.causes import BUSY_DOUBT
from pytest_dlbench.results.judge.stats import combine_log_ratios, p_in_direction, t_test
from pytest_dlbench.results.model.summary import BenchSummary

__all__ = ["DEFAULT_BETWEEN_RUN_CV", "DEFAULT_SESSION_DRIFT_CV", "MIN_SESSION_DRIFT_CV",
           "MAX_FIGURE", "Drift", "NoiseEvidence", "SideNoise", "between_run_cv",
           "combined_evidence", "doubts", "estimate_drift", "evidence", "out_of_range",
           "range_note", "score_evidence", "session_drift", "side_noise"]

#: One run's variation between runs, and a session's drift between sessions, assumed where the
#: baseline does not measure them; the least drift taken (docs/reports.md: measured on a shared
#: 2-core runner, benchmarks/README.md).
DEFAULT_BETWEEN_RUN_CV = 0.08
DEFAULT_SESSION_DRIFT_CV = 0.05
MIN_SESSION_DRIFT_CV = 0.01




def out_of_range(value: float) -> bool:
    """Whether a rate (or a sample) is one the statistics cannot take: not finite, or beyond
    :data:`MAX_FIGURE` in magnitude. Such a side is "incomparable" (:func:`range_note`)."""
    return not math.isfinite(value) or abs(value) > MAX_FIGURE


@dataclass(frozen=True)
class Drift:
    """The drift between sessions: its cv, degrees of freedom, and where it came from."""

    cv: float
    df: float
    source: str

    @property
    def assumed(self) -> bool:
        """The documented default, not measured on this machine (no degrees of freedom)."""
        return math.isinf(self.df)


@dataclass(frozen=True)
class SideNoise:
    """One side's figure as the test sees it: ``ln(perf)`` and its variance."""

    log_rate: float
    var: float  # variance of log_rate
    df: float  # degrees of freedom behind var (math.inf: assumed, not estimated)
    source: str  # "3 runs", "1 run at the baseline's 5 runs' spread", "1 run at the default 8%"
    #: Whether var comes from this side's own runs; else from the model, which describes the
    #: machine's drift between runs and so moves every benchmark of a run alike.
    own_runs: bool = False
    #: The drift of this side's session (:class:`Drift`): its variance, shared by every
    #: benchmark of the session, and its degrees of freedom.
    drift_var: float = 0.0
    drift_df: float = math.inf

    @property
    def parts(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(variance, degrees of freedom) of the runs' noise and of the session's drift."""
        return (self.var, self.df), (self.drift_var, self.drift_df)


@dataclass(frozen=True)
class NoiseEvidence:
    """What the two sides say of their ratio: one-sided p-values, the interval, the noise (the
    verdict core takes it as its own ``Evidence``: :attr:`judged`)."""

    ratio: float
    p_lower: float  # that the current side is slower
    p_higher: float  # that it is faster
    ci: tuple[float, float]  # of the ratio, at 1 - 2 alpha
    current: SideNoise
    baseline: SideNoise
    drift: Drift | None = None
    #: Why either side's figure cannot carry a change beyond the tolerance (:func:`doubts`).
    doubts: tuple[str, ...] = ()

    @property
    def p(self) -> float:
        """The one-sided p-value in the direction of the ratio."""
        return self.p_lower if self.ratio < 1 else self.p_higher

    @property
    def noise(self) -> str:
        """Where each side's noise came from, one phrase (the reports' ``noise`` column)."""
        runs = f"this run {self.current.source}, the baseline {self.baseline.source}"
        if self.drift is None:
            return runs
        return f"{runs}; each session ±{self.drift.cv:.1%} ({self.drift.source})"

    @property
    def judged(self) -> verdict.Evidence:
        """This test as the verdict core takes it, with the doubts on either side's figure."""
        return verdict.Evidence(self.ratio, self.p, self.ci, noise=self.noise,
                                doubts=self.doubts)


def _mean_cv(rates: Sequence[float]) -> tuple[float, float] | None:
    """(mean, coefficient of variation) of two or more positive rates; None otherwise."""
    if len(rates) < 2 or any(out_of_range(x) or x <= 0 for x in rates):
        return None
    mean = statistics.fmean(rates)
    return mean, statistics.stdev(rates) / mean


def between_run_cv(baseline: BenchSummary) -> tuple[float, float, str]:
    """The model the baseline carries: (cv of one run between runs, its degrees of freedom,
    where it came from)."""
    own = _mean_cv(baseline.rates)
    if own is not None:
        n = len(baseline.rates)
        return own[1], n - 1.0, f"the baseline's {n} runs' spread"
    return DEFAULT_BETWEEN_RUN_CV, math.inf, f"the default {DEFAULT_BETWEEN_RUN_CV:.0%}"


def estimate_drift(groups: Sequence[Sequence[Sequence[float]]], source: str) -> Drift | None:
    """The drift between sessions of sessions' run rates nested in groups (one group: the
    sessions of a merged baseline; several: the sessions of each commit in a history, whose
    code differs between groups, not within one): one-way random effects, the spread of each
    group's session log means about the group's own mean, pooled over the groups, less what
    the runs' own noise explains; ``sum(k - 1)`` degrees of freedom, not below
    :data:`MIN_SESSION_DRIFT_CV`. None without a group of two sessions or more."""
    kept = [[[x for x in rates if not out_of_range(x) and x > 0] for rates in group]
            for group in groups]
    kept = [[s for s in group if s] for group in kept]
    kept = [group for group in kept if len(group) >= 2]
    if not kept:
        return None
    sessions = [s for group in kept for s in group]
    means = [statistics.fmean(s) for s in sessions]
    # What the runs' own noise adds to the spread of the session means: each session's
    # variance of its log mean, a session of one run at the others' pooled cv.
    cvs = [statistics.stdev(s) / m for s, m in zip(sessions, means, strict=True) if len(s) >= 2]
    pooled = math.sqrt(statistics.fmean(c * c for c in cvs)) if cvs else 0.0
    within = statistics.fmean(
        (statistics.stdev(s) / m if len(s) >= 2 else pooled) ** 2 / len(s)
        for s, m in zip(sessions, means, strict=True))
    squares, df = 0.0, 0
    for group in kept:
        logs = [math.log(statistics.fmean(s)) for s in group]
        centre = statistics.fmean(logs)
        squares += sum((x - centre) ** 2 for x in logs)
        df += len(group) - 1
    cv = max(math.sqrt(max(squares / df - within, 0.0)), MIN_SESSION_DRIFT_CV)
    return Drift(cv, float(df), source)


def session_drift(baseline: BenchSummary, known: Drift | None = None) -> Drift:
    """The drift between sessions for a comparison with ``baseline``:
    estimated from the sessions of a merged baseline; else ``known`` (the machine's history,
    results/judge/history_drift.py); else the default."""
    k = len([s for s in baseline.session_rates if s])
    found = estimate_drift([baseline.session_rates], f"{k} sessions of the baseline")
    if found is not None:
        return found
    if known is not None:
        return known
    return Drift(DEFAULT_SESSION_DRIFT_CV, math.inf, f"the default {DEFAULT_SESSION_DRIFT_CV:.0%}")


def _within_var(bench: BenchSummary, rate: float) -> float:
    """The variance of ln(rate) that a single run's blocks show (0 without two blocks)."""
    blocks = [x for x in bench.noise_samples if not out_of_range(x)]
    if len(blocks) < 2:
        return 0.0
    return statistics.variance(blocks) / len(blocks) / (rate * rate)


def side_noise(bench: BenchSummary, rate: float, model: tuple[float, float, str],
               drift: Drift | None = None) -> SideNoise:
    """One side's :class:`SideNoise` (``rate``: its perf, positive), by the module's model;
    ``drift``: a session's (none: the runs' noise alone), averaged over the sessions of a
    merged baseline (its figure is the mean of theirs)."""
    drift_var, drift_df = (0.0, math.inf) if drift is None else (drift.cv**2 / bench.session_count,
                                                                 drift.df)
    runs = _mean_cv(bench.rates)
    n = len(bench.rates)
    if runs is not None:
        return SideNoise(math.log(rate), runs[1] ** 2 / n, n - 1.0, f"{n} runs", True,
                         drift_var, drift_df)
    cv, df, where = model
    within = _within_var(bench, rate)
    if within > cv * cv:  # noisier within itself than the model: its own blocks
        blocks = len(bench.noise_samples)
        return SideNoise(math.log(rate), within, blocks - 1.0, f"1 run, its {blocks} blocks",
                         False, drift_var, drift_df)
    return SideNoise(math.log(rate), cv * cv, df, f"1 run at {where}", False, drift_var,
                     drift_df)


def evidence(
    current: BenchSummary, baseline: BenchSummary, cur_rate: float, base_rate: float,
    *, alpha: float, known_drift: Drift | None = None,
) -> NoiseEvidence:
    """The test of ``cur_rate / base_rate`` (both positive) with the noise between runs and
    the drift between the two sessions (the baseline's model describes both: one machine;
    ``known_drift``: the machine's history's estimate, for a baseline of one session), and the
    doubts on either side's figure."""
    model, drift = between_run_cv(baseline), session_drift(baseline, known_drift)
    cur = side_noise(current, cur_rate, model, drift)
    base = side_noise(baseline, base_rate, model, drift)
    doubted = tuple(doubts(current, baseline, faster=cur_rate / base_rate > 1))
    diff = cur.log_rate - base.log_rate
    (p_lower, p_higher), ci = t_test(diff, (*cur.parts, *base.parts), alpha)
    return NoiseEvidence(math.exp(diff), p_lower, p_higher, ci, cur, base, drift, doubted)


def range_note(current: BenchSummary, baseline: BenchSummary) -> str | None:
    """Why figures no test can take (a rate of 1e308: its square overflows) are no pair."""
    for side, bench in (("this run", current), ("the baseline", baseline)):
        figures = [bench.perf, bench.perf_adj, *bench.noise_samples]
        wrong = next((x for x in figures if x is not None and out_of_range(x)), None)
        if wrong is not None:
            return (f"not compared: {side} has a rate of {wrong:.3g}, beyond what the "
                    f"statistics can take (at most {MAX_FIGURE:.0e} in magnitude)")
    return None


# -- what puts a side's figure in doubt -------------------------------------------------------
def doubts(current: BenchSummary, baseline: BenchSummary, *, faster: bool = False
           ) -> list[str]:
    """Why either side's figure cannot carry a verdict beyond the tolerance, one phrase each:
    a std% flagged unreliable, a run taken on a busy machine. ``faster``: this run reads faster
    than the baseline, and then this run's busy machine is no doubt: load only slows a run, so
    a run faster while busy is faster still and hides no regression (an unchanged suite that
    read 5 % faster on a busy run exited 9 before; benchmarks/README.md)."""
    out = []
    for side, bench, load_counts in (("this run", current, not faster),
                                     ("the baseline", baseline, True)):
        if bench.unreliable:
            out.append(f"{side}'s figure is unreliable ({bench.unreliable})")
        busy, ok, why = busy_share(bench)
        if busy and load_counts:
            out.append(f"{BUSY_DOUBT} during {side} ({busy} of {ok} runs: {why})")
    return out


# -- the score -------------------------------------------------------------------------------
def score_evidence(
    rate_ratio: float | None,
    terms: Sequence[tuple[float, NoiseEvidence, BenchSummary, BenchSummary]],
    alpha: float,
) -> verdict.Evidence | None:
    """The score's evidence (None without a rate ratio): the weighted benchmarks'
    ``(weight, evidence, current side, baseline side)`` combined (:func:`combined_evidence`),
    its p in the ratio's direction, and the doubts on any of their figures in that direction."""
    if rate_ratio is None:
        return None
    combined = combined_evidence([(w, e) for w, e, _, _ in terms], alpha)
    doubted = tuple(d for _, _, cur, base in terms
                    for d in doubts(cur, base, faster=rate_ratio > 1))
    return verdict.Evidence(
        rate_ratio, p_in_direction(rate_ratio, combined[0]) if combined is not None else None,
        combined[1] if combined is not None else None, doubts=doubted)


def combined_evidence(
    terms: Sequence[tuple[float, NoiseEvidence]], alpha: float
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """One-sided p-values ``(p_lower, p_higher)`` of the weighted mean log ratio of the
    benchmarks' :class:`NoiseEvidence` (``(weight, evidence)``) and its interval as a ratio; None
    without any.

    A side judged by its own runs is independent of the other benchmarks (the score's evidence
    grows with them: a drop spread thinly over many benchmarks is caught). A single run judged
    by the model is not: a slower machine moves every benchmark of that run alike, so those
    parts of one side add up as one (their standard deviations summed; the two sides' runs
    still drift independently of each other), and twenty single-run benchmarks
    slowed by one busy afternoon are no more evidence than one. A session's drift is shared
    by its benchmarks the same way, whatever their repeats."""
    used = [(w, e) for w, e in terms if w > 0]
    total = sum(w for w, _ in used)
    if not used or total <= 0:
        return None
    parts: list[tuple[float, float]] = []
    for which in ("current", "baseline"):  # the two runs drift independently of each other
        model_sd, model_df = 0.0, math.inf
        drift_sd, drift_df = 0.0, math.inf
        for w, e in used:
            side: SideNoise = getattr(e, which)
            if side.own_runs:
                parts.append(((w / total) ** 2 * side.var, side.df))
            else:
                model_sd += w / total * math.sqrt(side.var)
                model_df = min(model_df, side.df)
            drift_sd += w / total * math.sqrt(side.drift_var)
            drift_df = min(drift_df, side.drift_df)
        parts += [(model_sd**2, model_df), (drift_sd**2, drift_df)]
    mean = sum(w / total * math.log(e.ratio) for w, e in used)
    return combine_log_ratios([(1.0, mean, parts)], alpha)
