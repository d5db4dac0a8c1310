"""Confirm before failing (``--bench-confirm=N``): a saved-baseline verdict of "regressed" or
"improved" holds when every successful confirmation run repeats it on its own and the first pass
and the confirmation runs compared together as repeats still say it; a slowdown beyond the
tolerance that the noise left "inconclusive" is run again the same way, and regresses on that
same evidence (the core's ``suspicion`` and ``judge_confirmation``; docs/reports.md,
"Confirmation"). Pure (summaries in, summaries out)
apart from :func:`read_confirmation`, which reads the runs kept under ``confirm/<k>/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any

from pytest_dlbench.core import untrusted
from pytest_dlbench.core.numbers import is_integer
from pytest_dlbench.layout import Manifest, confirm_done, confirm_streams
from pytest_dlbench.results.figures.scoring import load_run, summarize_runs
from pytest_dlbench.results.judge.saved import compare_summaries
from pytest_dlbench.results.judge.verdict import (
    NOT_HELD,
    Rule,
    judge_confirmation,
    judge_confirmed_score,
    suspicion,
)

if TYPE_CHECKING:
    from pytest_dlbench.results.judge.comparison import Comparison
    from pytest_dlbench.results.judge.noise import Drift
    from pytest_dlbench.results.model.run_result import RunResult
    from pytest_dlbench.results.model.summary import SuiteSummary

__all__ = ["NOT_HELD", "BenchConfirmation", "Confirmation", "confirm", "read_confirmation",
           "suspected"]


# -- the decision ------------------------------------------------------------------------------
def suspected(comparison: Comparison) -> dict[str, str]:
    """The benchmarks whose first pass is worth confirming, each with the change it suspects
    (the core's :func:`~pytest_dlbench.results.judge.verdict.suspicion`)."""
    rule = Rule(comparison.tolerance, comparison.alpha)
    found = {b.name: suspicion(b.verdict, b.ratio, rule, b.doubts) for b in comparison.benchmarks}
    return {name: word for name, word in found.items() if word is not None}


@dataclass(frozen=True)
class BenchConfirmation:
    """One suspected benchmark: its first pass, its confirmation runs, the verdict kept."""

    name: str
    first: str  # the first pass's verdict
    first_ratio: float | None
    ratios: tuple[float, ...]  # each successful confirmation run's rate / the baseline's perf
    failed: int  # confirmation runs that did not succeed: no evidence either way
    combined: str  # the verdict of the first pass and the confirmations as repeats
    combined_ratio: float | None
    verdict: str  # what the comparison says now
    #: The change the first pass suspected: its verdict, or "regressed" for a slowdown beyond
    #: the tolerance it called inconclusive.
    suspected: str

    @property
    def held(self) -> bool:
        return self.verdict == self.suspected and bool(self.ratios)

    @property
    def outcome(self) -> str:
        """``held``, ``not held`` or ``not confirmed`` (no confirmation run succeeded)."""
        if not self.ratios:
            return "not confirmed"
        return "held" if self.held else "not held"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "ratios": list(self.ratios), "outcome": self.outcome}


@dataclass(frozen=True)
class Confirmation:
    """The confirmation of a run's suspected verdicts (``limit``: ``--bench-confirm``)."""

    limit: int
    benchmarks: tuple[BenchConfirmation, ...]

    def get(self, name: str) -> BenchConfirmation | None:
        return next((b for b in self.benchmarks if b.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "benchmarks": [b.to_dict() for b in self.benchmarks]}


def confirm(
    first: SuiteSummary,
    runs: Iterable[RunResult],
    baseline: SuiteSummary,
    comparison: Comparison,
    *,
    tolerance: float,
    alpha: float,
    limit: int,
    drifts: Mapping[str, Drift] | None = None,
) -> tuple[SuiteSummary, Comparison, Confirmation]:
    """The first pass ``first`` (compared with ``baseline`` as ``comparison``) and the
    confirmation ``runs``: the summary of both (the successful runs of the suspected benchmarks
    added as repeats), its comparison with the verdicts the rule keeps, and the record of each
    suspected benchmark."""
    names = suspected(comparison)
    extra = [r for r in runs if r.bench in names]
    ok = [r for r in extra if r.ok and r.rate is not None]
    # The first pass's benchmarks as a manifest: their order, weights and units stay.
    manifest = Manifest(suite=first.suite,
                        benchmarks={b.name: b.manifest_entry for b in first.benchmarks})
    combined = summarize_runs([*first.runs, *ok], manifest, run_dir=first.run_dir)
    combined = dataclasses.replace(combined, provenance=first.provenance)
    after = compare_summaries(combined, baseline, tolerance=tolerance, alpha=alpha, drifts=drifts)
    firsts = {b.name: b for b in comparison.benchmarks}
    records: list[BenchConfirmation] = []
    benches = []
    for bench in after.benchmarks:
        before = firsts.get(bench.name)
        if before is None or bench.name not in names:
            benches.append(bench)
            continue
        ratios = [r.rate / before.baseline for r in ok
                  if r.bench == bench.name and r.rate is not None and before.baseline > 0]
        failed = sum(1 for r in extra if r.bench == bench.name and not (r.ok and r.rate))
        # No successful confirmation run: the first pass's verdict is all there is.
        kept = judge_confirmation(before.verdict, bench.verdict, ratios, Rule(tolerance, alpha),
                                  names[bench.name], bench.p_value)
        record = BenchConfirmation(bench.name, before.verdict, before.ratio, tuple(ratios),
                                   failed, bench.verdict, bench.ratio, kept, names[bench.name])
        records.append(record)
        benches.append(dataclasses.replace(bench, verdict=record.verdict))
    # The score: a change only on the strength of benchmarks whose verdict did not hold does
    # not hold either.
    word = after.score_verdict
    backed = any(b.verdict == word for b in benches if b.weight > 0)
    dropped = any(r.first == word and r.verdict != word for r in records)
    final = dataclasses.replace(after, benchmarks=tuple(benches),
                                score_verdict=judge_confirmed_score(word, backed, dropped))
    return combined, final, Confirmation(limit, tuple(records))


# -- reading a run directory's confirmation ----------------------------------------------------
def read_confirmation(
    run_dir: str | PathLike[str],
    first: SuiteSummary,
    baseline: SuiteSummary,
    comparison: Comparison,
    *,
    tolerance: float,
    alpha: float,
    drifts: Mapping[str, Drift] | None = None,
) -> tuple[SuiteSummary, Comparison, Confirmation] | None:
    """:func:`confirm` with the confirmation runs ``run_dir`` keeps under ``confirm/<k>/``;
    None when there is nothing to confirm or no confirmation ran to its end
    (``confirm/confirmed.json`` is written once every round ran: Ctrl-C cut short, the first
    pass's verdicts stand, in pytest and ``dlbench report``)."""
    if not suspected(comparison):
        return None
    done, streams = confirm_done(run_dir), confirm_streams(run_dir)
    try:
        data = untrusted.read_json(done)
    except (OSError, ValueError):
        return None
    limit = data.get("limit") if isinstance(data, Mapping) else None
    if not is_integer(limit):
        return None
    return confirm(first, [load_run(p) for p in streams], baseline, comparison,
                   tolerance=tolerance, alpha=alpha, limit=limit, drifts=drifts)
