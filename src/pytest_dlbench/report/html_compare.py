"""The HTML report's verdicts: the gate's banner at the top of the page and the comparison
section (per-benchmark ratios, drawn as bars around 1 with the tolerance shaded).

The banner says what the exit status says (results/gate.py), in words, so that the page never
contradicts the run: a comparison that exited 6 is "Gate failed" in red, whatever the score's
own ratio is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_dlbench.core.numbers import DASH, percent, significant
from pytest_dlbench.results import gate
from pytest_dlbench.results.evaluation import judged
from pytest_dlbench.results.figures import figures_in_doubt
from pytest_dlbench.results.judge import IMPROVED, INCONCLUSIVE, REGRESSED, UNCHANGED

if TYPE_CHECKING:
    from pytest_dlbench.results.judge import BenchComparison, Comparison
    from pytest_dlbench.results.model import SuiteSummary

__all__ = ["ComparisonRow", "ComparisonView", "GateBanner", "RatioBar", "comparison_view",
           "gate_banner", "page_status", "rounds_text", "section_title"]

VERDICT_CLASS = {REGRESSED: "bad", IMPROVED: "good", UNCHANGED: "neutral",
                 INCONCLUSIVE: "other"}

#: The widest change a ratio bar draws (beyond it the bar is clipped at the cell's edge).
MAX_SPAN = 1.0
#: The narrowest: a table of changes within ±1 % is drawn at ±5 %, not blown up.
MIN_SPAN = 0.05


@dataclass(frozen=True)
class RatioBar:
    """A bar from the centre (ratio 1) of its cell: % of the cell's width."""

    left: float
    width: float
    tol_left: float  # the tolerance band, shaded
    tol_width: float
    clipped: bool  # the change is beyond the cell's span


@dataclass(frozen=True)
class ComparisonRow:
    name: str
    baseline: str
    current: str
    ratio: str
    change: str
    verdict: str
    verdict_class: str
    p_value: str
    adj_ratio: str = "—"
    ci: str = ""  # the ratio's interval (paired comparisons)
    bar: RatioBar | None = None


@dataclass(frozen=True)
class ComparisonView:
    rows: list[ComparisonRow]
    score_ratio: str
    score_verdict: str
    score_verdict_class: str
    only_current: list[str]
    only_baseline: list[str]
    tolerance: str
    baseline: str | None  # the baseline file
    warnings: list[str]
    score_rate_ratio: str = "—"
    paired: str | None = None  # "main (1a2b3c4), 6 rounds": a --bench-against comparison
    ci_level: str = ""  # "90 %": the level of the intervals shown (paired only)
    span: str = ""  # the bars' scale: "±10 %"
    regressed: bool = False  # the gate's answer (a benchmark or the score regressed)
    #: Why each inconclusive verdict is one ("name: reason"), and what to do about them.
    inconclusive: tuple[str, ...] = ()
    advice: str = ""
    why: str = ""  # what made them inconclusive (results/gate.py's causes), capitalised
    #: The judged ratio's name (the table's column) and what it is, and the rule, as the
    #: terminal and the JSON say them (results/judge/comparison.Comparison).
    ratio_name: str = "ratio"
    ratio_means: str = ""
    rule: str = ""
    #: The section's title: a saved baseline's, or a paired run's (its base revision).
    title: str = "Comparison with the baseline"
    #: What the run is compared with, in the page's words: ``baseline`` or ``base revision``.
    reference: str = "baseline"


@dataclass(frozen=True)
class GateBanner:
    """The page's first line: the gate's verdict and the exit status it means."""

    status: int
    css: str  # "good", "bad" or "warn"
    headline: str
    detail: str


def _span(comparison: Comparison) -> float:
    changes = [abs(c.ratio - 1.0) for c in comparison.benchmarks if c.ratio is not None]
    widest = max([2 * comparison.tolerance, *changes], default=MIN_SPAN)
    return min(MAX_SPAN, max(MIN_SPAN, widest * 1.1))


def _bar(ratio: float | None, tolerance: float, span: float) -> RatioBar | None:
    if ratio is None or not math.isfinite(ratio):
        return None
    change = ratio - 1.0
    clipped = abs(change) > span
    width = min(abs(change), span) / span * 50
    tol = min(tolerance, span) / span * 50
    return RatioBar(left=round(50 - width if change < 0 else 50.0, 2), width=round(width, 2),
                    tol_left=round(50 - tol, 2), tol_width=round(2 * tol, 2), clipped=clipped)


def _row(c: BenchComparison, tolerance: float, span: float) -> ComparisonRow:
    return ComparisonRow(
        name=c.name,
        baseline=significant(c.baseline),
        current=significant(c.current),
        ratio=significant(c.ratio, 3),
        change=percent(c.ratio - 1.0, space=True, missing=DASH) if c.ratio is not None else DASH,
        verdict=c.verdict,
        verdict_class=VERDICT_CLASS.get(c.verdict, "other"),
        p_value=significant(c.p_value, 3, zeros=False),
        adj_ratio=significant(c.adj_ratio, 3),
        ci=(f"{significant(c.ci[0], 3)} – {significant(c.ci[1], 3)}" if c.ci is not None
            else ""),
        bar=_bar(c.ratio, tolerance, span),
    )


def comparison_view(comparison: Comparison) -> ComparisonView:
    span = _span(comparison)
    return ComparisonView(
        rows=[_row(c, comparison.tolerance, span) for c in comparison.benchmarks],
        score_ratio=significant(comparison.score_ratio, 3),
        score_verdict=comparison.score_verdict,
        score_verdict_class=VERDICT_CLASS.get(comparison.score_verdict, "other"),
        only_current=list(comparison.only_current),
        only_baseline=list(comparison.only_baseline),
        tolerance=percent(comparison.tolerance, space=True, missing=DASH),
        baseline=comparison.baseline_path,
        warnings=list(comparison.warnings),
        score_rate_ratio=significant(comparison.score_rate_ratio, 3),
        paired=_paired_label(comparison),
        ci_level=f"{100 * (1 - 2 * comparison.alpha):g} %",
        span=f"±{significant(100 * span, 2, zeros=False)} %",
        regressed=comparison.regressed,
        inconclusive=_inconclusive(comparison),
        advice=comparison.inconclusive_advice if comparison.inconclusive else "",
        why=_capitalised(comparison.inconclusive_why) if comparison.inconclusive else "",
        ratio_name=comparison.ratio_name,
        ratio_means=comparison.ratio_means,
        rule=comparison.rule,
        title=section_title(comparison),
        reference=_reference(comparison),
    )


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def _inconclusive(comparison: Comparison) -> tuple[str, ...]:
    """The terminal's ``inconclusive:`` lines (report/terminal.py), one per verdict."""
    lines = [f"{c.name}: {c.reason}" for c in comparison.benchmarks
             if c.verdict == INCONCLUSIVE]
    if comparison.score_verdict == INCONCLUSIVE:
        lines.append(f"the score: {comparison.score_reason}")
    return tuple(lines)


def _paired_label(comparison: Comparison) -> str | None:
    """``main (1a2b3c4d5e), stopped after 6 of 10 rounds``: the base revision and the rounds
    that ran (results/judge/comparison.Comparison.rounds_ran), not the rounds asked for."""
    against = comparison.against
    if against is None:
        return None
    sha = (against.sha or "")[:10]
    return f"{against.rev} ({sha}), {rounds_text(comparison)}"


def rounds_text(comparison: Comparison) -> str:
    """The rounds a paired run ran: ``10 rounds`` (all asked), ``stopped after 6 of 10
    rounds``, ``4 to 6 of 10 rounds`` (benchmarks that stopped at different rounds)."""
    ran = comparison.rounds_ran
    asked = comparison.against.rounds if comparison.against is not None else None
    if ran is None:
        return f"{asked} rounds asked, none paired" if asked else "no round paired"
    fewest, most, planned = ran
    if planned is None or (fewest == most == planned):
        return f"{most} rounds" if fewest == most else f"{fewest} to {most} rounds"
    if fewest == most:
        return f"stopped after {most} of {planned} rounds"
    stopped = "stopped after " if most < planned else ""
    return f"{stopped}{fewest} to {most} of {planned} rounds"


def _reference(comparison: Comparison | None) -> str:
    """``baseline`` (a saved one) or ``base revision`` (``--bench-against``)."""
    return "base revision" if comparison is not None and comparison.against is not None \
        else "baseline"


def section_title(comparison: Comparison) -> str:
    """The comparison section's title: ``Comparison with the baseline`` (a saved baseline),
    ``Paired comparison with main`` (``--bench-against``), or ``Comparison with the base
    revision`` when the revision is not named."""
    if comparison.against is None:
        return "Comparison with the baseline"
    rev = comparison.against.rev
    return f"Paired comparison with {rev}" if rev else "Comparison with the base revision"


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def page_status(summary: SuiteSummary, comparison: Comparison | None) -> int:
    """The exit status the run has, when the caller did not say: its Evaluation's
    (results/evaluation.judged: the gate's rule on the summary and the comparison shown)."""
    return judged(summary.run_dir or ".", summary, comparison=comparison).status


def gate_banner(summary: SuiteSummary, comparison: Comparison | None,
                status: int | None = None) -> GateBanner:
    """The banner for ``status`` (the run's exit status; by default the gate's rule on
    ``summary`` and ``comparison``): its meaning in words, and why."""
    if status is None:
        status = page_status(summary, comparison)
    # The comparison's own list (results/judge/comparison.Comparison.regressions), never a word
    # compared here.
    regressed = list(comparison.regressions) if comparison is not None else []
    also = ""
    if comparison is not None and comparison.regressed:
        what = _names(regressed) if regressed else "the score"
        also = f"; against the {_reference(comparison)}, {what} regressed"
    code = f"exit status {status}"
    if status == gate.EXIT_REGRESSED:
        tol = percent(comparison.tolerance, space=True) if comparison is not None else ""
        what = _names(regressed) if regressed else "the score"
        return GateBanner(status, "bad", "Gate failed: performance regressed",
                          f"{code}: every benchmark ran, but {what} regressed against the "
                          f"{_reference(comparison)} (slower beyond the {tol} tolerance, and "
                          "significant).")
    if status == gate.EXIT_INCONCLUSIVE:
        assert comparison is not None  # 9 is only ever a comparison's status
        doubtful = list(comparison.inconclusives) or ["the score"]
        return GateBanner(status, "warn", f"Gate inconclusive: {comparison.inconclusive_why}",
                          f"{code}: every benchmark ran and none regressed, but "
                          f"{_names(doubtful)} could not be told from noise against the "
                          f"{_reference(comparison)}. To get a verdict, "
                          f"{comparison.inconclusive_advice}.")
    if status == gate.BENCH_FAILED:
        failed = sorted({r.bench for r in summary.runs if not r.ok and not r.skipped})
        missing = [n for n in summary.incomplete if n not in failed]
        parts = []
        if failed:
            parts.append(f"{_names(failed)} failed")
        if missing:
            parts.append(f"{_names(missing)} did not run")
        why = " and ".join(parts) or "a benchmark failed"
        return GateBanner(status, "bad", "A benchmark failed",
                          f"{code}: {why}{also}. A failure wins over the comparison.")
    if status == gate.BASELINE_MISSING:
        return GateBanner(status, "warn", "No baseline to compare with",
                          f"{code}: the baseline file asked for does not exist, so nothing was "
                          "judged.")
    if status == gate.OUTPUT_FAILED:
        return GateBanner(status, "warn", "An output could not be written",
                          f"{code}: measured and passed, but a file asked for (--bench-save, "
                          "--bench-html, --bench-export) could not be written.")
    if status == gate.USAGE_ERROR:
        return GateBanner(status, "bad", "Bad input", f"{code}: an option or a file given "
                          "could not be used; see the command's output.")
    if status == gate.INTERRUPTED:
        return GateBanner(status, "warn", "Interrupted",
                          f"{code}: the run was stopped before its end; what ran is shown.")
    if status != gate.OK:
        return GateBanner(status, "warn", f"Exit status {status}", f"{code}.")
    doubted = figures_in_doubt(summary)  # results/figures/doubt.py: unreliable, or a busy machine
    if doubted:
        return _in_doubt(status, doubted, comparison)
    if comparison is None:
        return GateBanner(status, "good", "Every benchmark ran",
                          f"{code}: no baseline was compared (--bench-compare, "
                          "--bench-against), so there is no gate verdict.")
    tol = percent(comparison.tolerance, space=True)
    return GateBanner(status, "good", "Gate passed: nothing regressed",
                      f"{code}: every benchmark ran, and no benchmark is significantly slower "
                      f"than the {_reference(comparison)} beyond the {tol} tolerance (given both "
                      "sides' noise).")


def _in_doubt(status: int, doubted: tuple[str, ...], comparison: Comparison | None) -> GateBanner:
    """Status 0 with a weighted benchmark's figure in doubt: amber, never the green all-clear
    (the score is made of those figures)."""
    one = len(doubted) == 1
    figures = (f"{doubted[0]}'s figure is" if one else
               f"the figures of {_names(list(doubted))} are")
    doubt = (f"{figures} in doubt: unreliable (std% flagged) or measured on a busy machine, "
             "as their badges below say; rerun on a quieter runner for figures to trust")
    if comparison is None:
        return GateBanner(status, "warn", "Every benchmark ran, figures in doubt",
                          f"exit status {status}: {doubt}. No baseline was compared "
                          "(--bench-compare, --bench-against), so there is no gate verdict.")
    tol = percent(comparison.tolerance, space=True)
    return GateBanner(status, "warn", "Gate passed, figures in doubt",
                      f"exit status {status}: no benchmark is significantly slower than the "
                      f"{_reference(comparison)} beyond the {tol} tolerance, but {doubt}.")
