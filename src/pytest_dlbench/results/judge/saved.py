"""A run against a saved baseline: per benchmark the perf ratio (``perf / baseline perf``, the
rates themselves, not ``perf_adj``, whose spread the test already sees) and its evidence
(results/judge/noise.py), the score's evidence combined over the benchmarks scored on both
sides, in the rows every mode returns (results/judge/comparison.py). The verdicts are the
core's (results/judge/verdict.py). ``score_ratio`` stays milarun's ratio of the perf_adj
scores, shown beside. :func:`compare_saved` is the saved-baseline mode whole, for
``evaluate`` and ``dlbench compare`` alike. docs/reports.md, "Baselines and the regression
gate".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pytest_dlbench.core.numbers import weighted_geomean
from pytest_dlbench.results.figures import machine
from pytest_dlbench.results.judge import noise
from pytest_dlbench.results.judge.comparison import BenchComparison, Comparison, units_note
from pytest_dlbench.results.judge.history_drift import HistoryDrifts
from pytest_dlbench.results.judge.noise import Drift
from pytest_dlbench.results.judge.verdict import (
    ALPHA,
    TOLERANCE,
    Rule,
    judge,
    judge_score,
    judge_unmatched,
)
from pytest_dlbench.results.model.run_result import THROUGHPUT, TOTAL_TIME
from pytest_dlbench.results.model.summary import BenchSummary, SuiteSummary

if TYPE_CHECKING:
    from pytest_dlbench.results.judge.confirm import Confirmation

__all__ = ["Confirm", "SavedComparison", "compare", "compare_saved", "compare_summaries"]


# -- one benchmark -----------------------------------------------------------------------------

def _rate(bench: BenchSummary) -> float:
    """A benchmark's perf (0 when no run succeeded, or not a positive number): the rate the
    verdict judges."""
    try:
        number = float(bench.perf or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and number > 0 else 0.0


def _ratio(current: float | None, baseline: float | None) -> float | None:
    """current / baseline of two positive figures; None when either is not, or the ratio of
    two figures far apart is not a finite, non-zero float."""
    if not (current and baseline and current > 0 and baseline > 0):
        return None
    ratio = current / baseline
    return ratio if 0 < ratio < math.inf else None


def _time(bench: BenchSummary) -> float | None:
    """A time-to-train benchmark's time (None for other metrics)."""
    return bench.total_time_secs if bench.lower_is_better else None



def _compare_bench(
    name: str, cur: BenchSummary, base: BenchSummary, rule: Rule, known_drift: Drift | None,
) -> tuple[BenchComparison, noise.NoiseEvidence | None]:
    """One row, and the evidence behind its verdict (None when there was no test): the rates
    and what is shown beside them first, then the evidence, then the core's verdict."""
    cur_rate, base_rate = _rate(cur), _rate(base)
    adj_ratio = _ratio(cur.perf_adj, base.perf_adj)
    times = (_time(cur), _time(base))
    refused = units_note(cur, base) or noise.range_note(cur, base)
    found = None
    if refused is None and cur_rate > 0 and base_rate > 0:
        found = noise.evidence(cur, base, cur_rate, base_rate, alpha=rule.alpha,
                               known_drift=known_drift)
    if found is not None:
        ratio: float | None = cur_rate / base_rate
        judged = judge(found.judged, rule)
    else:  # no ratio: the core names the side that has no run, or why they are no pair
        ratio = 0.0 if refused is None and base_rate > 0 else None
        judged = dataclasses.replace(judge_unmatched(
            current_ran=cur_rate > 0, reference_ran=base_rate > 0, refused=refused), reason="")
    shown = refused is None  # a refused pair shows no adj ratio nor times
    return BenchComparison(
        name=name,
        units=cur.units or base.units,
        weight=cur.weight,
        current=cur_rate,
        baseline=base_rate,
        ratio=ratio,
        verdict=judged.word,
        p_value=found.p if found is not None else None,
        samples=(len(cur.noise_samples), len(base.noise_samples)),
        current_adj=cur.perf_adj,
        baseline_adj=base.perf_adj,
        adj_ratio=adj_ratio if shown else None,
        ci=found.ci if found is not None else None,
        note=refused or "",
        metric=TOTAL_TIME if shown and TOTAL_TIME in (cur.metric, base.metric) else THROUGHPUT,
        current_time=times[0] if shown else None,
        baseline_time=times[1] if shown else None,
        reason=judged.reason,
        noise=found.noise if found is not None else "",
        drift=found.drift if found is not None else None,
        doubts=found.doubts if found is not None else (),
    ), found


# -- the run -------------------------------------------------------------------------------------
def compare(
    current: SuiteSummary | Mapping[str, Any], baseline: SuiteSummary | Mapping[str, Any],
    tolerance: float = TOLERANCE, alpha: float = ALPHA, *,
    drifts: Mapping[str, Drift] | None = None,
) -> Comparison:
    """Compare ``current`` with ``baseline`` (each a SuiteSummary, or a saved summary's dict,
    read back with ``SuiteSummary.from_dict``): :func:`compare_summaries`."""
    sides = []
    for summary in (current, baseline):
        if isinstance(summary, Mapping) and isinstance(summary.get("benchmarks"), Mapping):
            summary = SuiteSummary.from_dict(summary)
        if not isinstance(summary, SuiteSummary):
            raise TypeError("compare() takes a SuiteSummary or a saved summary's dict with "
                            "'benchmarks'")
        sides.append(summary)
    return compare_summaries(sides[0], sides[1], tolerance, alpha, drifts=drifts)


def compare_summaries(
    cur: SuiteSummary, base: SuiteSummary, tolerance: float = TOLERANCE, alpha: float = ALPHA,
    *, drifts: Mapping[str, Drift] | None = None,
) -> Comparison:
    """Compare the run ``cur`` with the saved baseline ``base``. ``drifts``: each benchmark's
    drift between sessions measured on this machine (results/judge/history_drift.py), for a baseline
    of one session.

    When the baseline records its machine and the current side does too (a saved summary) or
    is a SuiteSummary measured here, a difference in GPU model or count, CPU model or torch
    version is one of the comparison's ``warnings``."""
    rule = Rule(tolerance, alpha)
    cur_b = {b.name: b for b in cur.benchmarks}
    base_b = {b.name: b for b in base.benchmarks}
    known = drifts or {}
    rows = [_compare_bench(n, cur_b[n], base_b[n], rule, known.get(n))
            for n in cur_b if n in base_b]
    benches = tuple(row for row, _ in rows)
    # Over the benchmarks scored on both sides: with the same set the perf_adj ratio is exactly
    # cs / bs, and a benchmark added or dropped (whose units are arbitrary) cannot move it.
    both = [(row, found) for row, found in rows if row.ratio and row.weight > 0
            and base_b[row.name].scored and cur_b[row.name].scored]
    score_ratio = weighted_geomean((b.adj_ratio or 0.0, b.weight) for b, _ in both)
    rate_ratio = weighted_geomean((b.ratio or 0.0, b.weight) for b, _ in both)
    score_found = noise.score_evidence(
        rate_ratio, [(b.weight, found, cur_b[b.name], base_b[b.name])
                     for b, found in both if found is not None], alpha)
    score = judge_score(score_found, {b.verdict for b in benches if b.weight > 0}, rule)
    return Comparison(
        benchmarks=benches,
        only_current=tuple(n for n in cur_b if n not in base_b),
        only_baseline=tuple(n for n in base_b if n not in cur_b),
        current_score=cur.score,
        baseline_score=base.score,
        score_ratio=score_ratio,
        score_verdict=score.word,
        score_p_value=score_found.p if score_found is not None else None,
        tolerance=tolerance,
        alpha=alpha,
        # A pair refused (units, range) is said where every report shows warnings.
        warnings=machine.baseline_warnings(cur, base) + tuple(
            f"{b.name}: {b.note}" for b in benches if b.note),
        score_rate_ratio=rate_ratio,
        score_ci=score_found.ci if score_found is not None else None,
        score_reason=score.reason,
        score_doubts=score_found.doubts if score_found is not None else (),
    )


# -- the saved-baseline mode -------------------------------------------------------------------
class Confirm(Protocol):
    """Runs the suspected verdicts of a first comparison again: results/judge/confirm.py's
    ``read_confirmation`` bound to a run directory. It gives the summary and the comparison
    with the confirmation runs, and their record; None when none ran to its end."""

    def __call__(self, first: SuiteSummary, baseline: SuiteSummary, comparison: Comparison, *,
                 tolerance: float, alpha: float, drifts: Mapping[str, Drift] | None,
                 ) -> tuple[SuiteSummary, Comparison, Confirmation] | None: ...


@dataclass(frozen=True)
class SavedComparison:
    """A run judged against a saved baseline: its summary (with the confirmation runs when
    they ran), the comparison, and the confirmation's record (None: none ran)."""

    summary: SuiteSummary
    comparison: Comparison
    confirmation: Confirmation | None = None


def compare_saved(
    current: SuiteSummary, baseline: SuiteSummary, *, tolerance: float = TOLERANCE,
    alpha: float = ALPHA, history: HistoryDrifts | None = None,
    baseline_path: str | None = None, confirm: Confirm | None = None,
) -> SavedComparison:
    """The saved-baseline mode, the one home of ``evaluate`` (pytest's ``--bench-compare``,
    ``dlbench report --compare``) and ``dlbench compare``: :func:`compare_summaries` with the
    drift between sessions that ``history`` measured, the suspected verdicts confirmed when
    ``confirm`` finds confirmation runs (``--bench-confirm``), then the file the baseline came
    from and the history files left out named for the reports."""
    history = history or HistoryDrifts()
    comparison = compare_summaries(current, baseline, tolerance, alpha, drifts=history.drifts)
    confirmation = None
    if confirm is not None:
        confirmed = confirm(current, baseline, comparison, tolerance=tolerance, alpha=alpha,
                            drifts=history.drifts)
        if confirmed is not None:
            current, comparison, confirmation = confirmed
    comparison = dataclasses.replace(comparison, baseline_path=baseline_path,
                                     warnings=(*comparison.warnings, *history.warnings))
    return SavedComparison(current, comparison, confirmation)
